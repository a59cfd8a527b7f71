package gateway

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
)

// panicGateway is a gateway whose echo has routes that panic, logging to
// the returned buffer.
func panicGateway(t *testing.T) (*Gateway, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	cfg := DefaultConfig()
	cfg.Auth = AuthConfig{AllowAnonymous: true}
	g, err := New(cfg, Options{Log: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	g.echo.POST("/v1/panics", func(echo.Context) error { panic("boom") })
	g.echo.POST("/v1/panics-committed", func(c echo.Context) error {
		c.Response().WriteHeader(http.StatusOK)
		_, _ = c.Response().Write([]byte("partial"))
		panic("boom")
	})
	g.echo.POST("/v1/aborts", func(echo.Context) error { panic(http.ErrAbortHandler) })
	return g, &logs
}

// TestHandlerPanic: a handler's panic is answered with a 500 in the
// native error shape (unless the response was committed), logged with
// its stack but not the request, and the request's access line follows
// with the status the client got; http.ErrAbortHandler passes through
// to net/http unanswered and unlogged.
func TestHandlerPanic(t *testing.T) {
	g, logs := panicGateway(t)
	serve := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		g.echo.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(`{"secret":"do-not-log"}`)))
		return rec
	}

	rec := serve("/v1/panics")
	if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), `"type":"server_error"`) {
		t.Fatalf("uncommitted panic: %d %s", rec.Code, rec.Body)
	}
	out := logs.String()
	if !strings.Contains(out, `"msg":"handler panic"`) || !strings.Contains(out, `"route":"/v1/panics"`) {
		t.Fatalf("no panic line: %s", out)
	}
	if i, j := strings.Index(out, `"msg":"handler panic"`), strings.Index(out, `"msg":"request"`); j < i || !strings.Contains(out[j:], `"status":500`) {
		t.Fatalf("the access line does not follow the panic with status 500: %s", out)
	}
	if strings.Contains(out, "do-not-log") {
		t.Fatal("the request reached the log")
	}

	logs.Reset()
	rec = serve("/v1/panics-committed")
	if rec.Code != http.StatusOK || rec.Body.String() != "partial" {
		t.Fatalf("committed panic: %d %q (nothing may follow what was written)", rec.Code, rec.Body)
	}
	if !strings.Contains(logs.String(), `"msg":"handler panic"`) || !strings.Contains(logs.String(), `"msg":"request"`) {
		t.Fatalf("committed panic logs: %s", logs)
	}

	logs.Reset()
	func() {
		defer func() {
			if r := recover(); r != http.ErrAbortHandler {
				t.Errorf("abort: recovered %v, want http.ErrAbortHandler", r)
			}
		}()
		serve("/v1/aborts")
	}()
	if logs.Len() != 0 {
		t.Fatalf("an aborted request was logged: %s", logs)
	}
}
