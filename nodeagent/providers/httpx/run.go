package httpx

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/iopgw/iop/execution"
)

// Run posts a normalized run's body to url, with the client headers the
// edge forwarded (filtered again: no credential passes), and, on a 200, emits the start
// event and hands the streaming response to read. An upstream error answer
// becomes the run's error event; a failure to reach the upstream, or the
// caller's cancel, is returned. It is the common frame of every normalized
// provider's Execute.
func Run(ctx context.Context, c *http.Client, url, accept string, header map[string][]string, body []byte, cred Credentials, model string,
	emit *execution.Emitter, read func(*http.Response) error) error {
	h := http.Header{}
	for k, v := range header {
		h[http.CanonicalHeaderKey(k)] = v
	}
	h.Set("Accept", accept)
	hreq, err := NewRequest(ctx, http.MethodPost, url, h, body, cred)
	if err != nil {
		return execution.NewFailure(execution.FailureCodeInvalidRequest, err.Error())
	}
	resp, err := c.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return Unreachable(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		ue := ParseUpstreamError(resp.StatusCode, resp.Header, ReadErrorBody(resp.Body))
		// The event's text is the upstream's own message: what the edge
		// answers the client with.
		emit.Emit(execution.RunEvent{Type: execution.EventTypeError, Error: cmp.Or(ue.Message, ue.Error()), Failure: execution.UpstreamFailure(ue)})
		return nil
	}
	emit.Emit(execution.RunEvent{Type: execution.EventTypeStart, Model: model})
	resp.Body = hooked(ctx, resp.Body)
	return read(resp)
}

// ProbeJSON GETs url for a health probe and decodes its JSON answer (at
// most 8 MiB) into v. Errors name what failed, never the URL.
func ProbeJSON(ctx context.Context, c *http.Client, url string, cred Credentials, v any) error {
	hreq, err := NewRequest(ctx, http.MethodGet, url, nil, nil, cred)
	if err != nil {
		return err
	}
	resp, err := c.Do(hreq)
	if err != nil {
		return fmt.Errorf("probe: %s", Unreachable(err).Message)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("probe: upstream status %d", resp.StatusCode)
	}
	if err := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 8<<20)).Decode(v); err != nil {
		return fmt.Errorf("probe: decoding the answer: %w", err)
	}
	return nil
}
