package stored

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/iopgw/iop/streamgate"
	"github.com/iopgw/iop/surface"
)

// TestRememberLookupForget: a response is found for the key that made
// it and no other, the least recently used is forgotten past the bound,
// and a deleted one is forgotten.
func TestRememberLookupForget(t *testing.T) {
	r := New(3)
	for i := range 3 {
		r.Remember(fmt.Sprintf("resp_%d", i), Entry{Owner: "team", Model: "m", Provider: "n/p"})
	}
	if _, ok := r.Lookup("resp_0", "other"); ok {
		t.Fatal("another key's lookup found the response")
	}
	if e, ok := r.Lookup("resp_0", "team"); !ok || e.Provider != "n/p" || e.Model != "m" {
		t.Fatalf("lookup: %+v %v", e, ok)
	}
	r.Remember("resp_3", Entry{Owner: "team", Model: "m", Provider: "n/q"}) // resp_1 is the least recently used
	if _, ok := r.Lookup("resp_1", "team"); ok || r.Len() != 3 {
		t.Fatalf("past the bound: resp_1 kept, %d remembered", r.Len())
	}
	for _, id := range []string{"resp_0", "resp_2", "resp_3"} {
		if _, ok := r.Lookup(id, "team"); !ok {
			t.Fatalf("%s forgotten", id)
		}
	}
	r.Forget("resp_2")
	if _, ok := r.Lookup("resp_2", "team"); ok || r.Len() != 2 {
		t.Fatal("a forgotten response is still found")
	}
}

// TestRequestSettleAndPin: a request naming a stored response is
// tunnelled as it came to the provider that keeps it, uncharged; an
// unknown one is a 404; a Responses answer passed on is remembered, a
// deleted one forgotten; a continuation is pinned to its provider (same
// model only).
func TestRequestSettleAndPin(t *testing.T) {
	r := New(0)
	if _, e := r.Request(httptest.NewRequest(http.MethodGet, "/v1/responses/resp_x", nil), nil, "resp_x", "", "req_1"); e == nil || e.Status != http.StatusNotFound {
		t.Fatalf("unknown: %v", e)
	}
	made := &streamgate.Request{Surface: surface.Responses, Model: "m"}
	r.Settle("team", made, &streamgate.Summary{Outcome: "ok", ResponseID: "resp_1", Provider: "n/p"})
	r.Settle("team", made, &streamgate.Summary{Outcome: "client_cancelled", ResponseID: "resp_2", Provider: "n/p"})
	r.Settle("team", &streamgate.Request{Surface: surface.Chat, Model: "m"}, &streamgate.Summary{Outcome: "ok", ResponseID: "resp_3", Provider: "n/p"})
	if r.Len() != 1 {
		t.Fatalf("%d remembered, want only the completed Responses answer", r.Len())
	}
	sreq, e := r.Request(httptest.NewRequest(http.MethodGet, "/v1/responses/resp_1/input_items?limit=2", nil), nil, "resp_1", "team", "req_2")
	if e != nil || sreq.RequestID != "req_2" || sreq.Pin != "n/p" || !sreq.Uncharged || sreq.Model != "m" || sreq.Work.Tunnel.Path != "/v1/responses/resp_1/input_items?limit=2" ||
		sreq.Work.Tunnel.Method != http.MethodGet || sreq.Stream || sreq.Surface != surface.Responses {
		t.Fatalf("request: %+v %v", sreq, e)
	}
	if _, e := r.Request(httptest.NewRequest(http.MethodGet, "/v1/responses/resp_1", nil), nil, "resp_1", "other", "req_3"); e == nil || e.Status != http.StatusNotFound {
		t.Fatalf("another key: %v", e)
	}
	// The events of a stored response, asked in the query or (the Go
	// SDK's way) in a GET's body: asked upstream in the query.
	for target, body := range map[string]string{"/v1/responses/resp_1?stream=true": "", "/v1/responses/resp_1": `{"stream":true}`,
		"/v1/responses/resp_1?starting_after=2": `{"stream":true}`} {
		sreq, e := r.Request(httptest.NewRequest(http.MethodGet, target, nil), []byte(body), "resp_1", "team", "req_5")
		if e != nil || !sreq.Stream || !strings.Contains(sreq.Work.Tunnel.Path, "stream=true") {
			t.Fatalf("%s %s: %+v %v", target, body, sreq.Work.Tunnel, e)
		}
	}
	if sreq, _ := r.Request(httptest.NewRequest(http.MethodGet, "/v1/responses/resp_1?stream=false", nil), []byte(`{"stream":true}`), "resp_1", "team", "req_6"); sreq.Stream || sreq.Work.Tunnel.Path != "/v1/responses/resp_1?stream=false" {
		t.Fatalf("the query's own stream: %+v", sreq.Work.Tunnel)
	}

	next := &streamgate.Request{Surface: surface.Responses, Model: "m", Fallbacks: []string{"f"}}
	r.Pin(next, "resp_1", "team")
	if next.Pin != "n/p" || next.Fallbacks != nil {
		t.Fatalf("pin: %+v", next)
	}
	for _, tc := range []struct{ id, owner, model string }{{"resp_1", "team", "other-model"}, {"resp_1", "other", "m"}, {"resp_9", "team", "m"}, {"", "team", "m"}} {
		sreq := &streamgate.Request{Surface: surface.Responses, Model: tc.model}
		if r.Pin(sreq, tc.id, tc.owner); sreq.Pin != "" {
			t.Fatalf("%+v pinned", tc)
		}
	}

	del, _ := r.Request(httptest.NewRequest(http.MethodDelete, "/v1/responses/resp_1", nil), nil, "resp_1", "team", "req_4")
	r.Settle("team", del, &streamgate.Summary{Outcome: "ok", Provider: "n/p"})
	if r.Len() != 0 {
		t.Fatal("a deleted response is still remembered")
	}
}
