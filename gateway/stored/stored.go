// Package stored remembers where the Responses API's stored responses
// are kept — which provider answered each, for which key — so that the
// requests naming one later go to that provider: retrieving, deleting or
// cancelling it, listing its input items, and a new response continuing
// it (previous_response_id). An upstream keeps its own responses; another
// provider of the same model does not know them.
//
// The memory is the edge's own and bounded: the least recently used
// response is forgotten first. A response the edge never passed on (made
// through another edge, or forgotten) is unknown to it.
package stored

import (
	"container/list"
	"encoding/json"
	"net/http"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/internal/httphdr"
	"github.com/iopgw/iop/internal/ids"
	"github.com/iopgw/iop/streamgate"
	"github.com/iopgw/iop/surface"
)

// DefaultMax is how many responses an edge remembers by default.
const DefaultMax = 100_000

// Entry is where one response is kept.
type Entry struct {
	Owner    string // the key that made it ("" where keys are off)
	Model    string // the model it was asked of
	Provider string // the provider that answered it, "<node_id>/<provider_id>"
}

// Responses is the edge's memory of stored responses. Safe for
// concurrent use.
type Responses struct {
	mu    sync.Mutex
	max   int
	byID  map[string]*list.Element
	order list.List // of *item, the most recently used first
}

type item struct {
	id string
	e  Entry
}

// New returns a memory of at most max responses (DefaultMax if max <= 0).
func New(max int) *Responses {
	if max <= 0 {
		max = DefaultMax
	}
	return &Responses{max: max, byID: map[string]*list.Element{}}
}

// Remember records where response id is kept.
func (r *Responses) Remember(id string, e Entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if el, ok := r.byID[id]; ok {
		el.Value.(*item).e = e
		r.order.MoveToFront(el)
		return
	}
	r.byID[id] = r.order.PushFront(&item{id, e})
	if r.order.Len() > r.max {
		last := r.order.Back()
		r.order.Remove(last)
		delete(r.byID, last.Value.(*item).id)
	}
}

// Lookup says where response id is kept, if it is known and owner's.
func (r *Responses) Lookup(id, owner string) (Entry, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	el, ok := r.byID[id]
	if !ok || el.Value.(*item).e.Owner != owner {
		return Entry{}, false
	}
	r.order.MoveToFront(el)
	return el.Value.(*item).e, true
}

// Forget drops response id (deleted upstream).
func (r *Responses) Forget(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if el, ok := r.byID[id]; ok {
		r.order.Remove(el)
		delete(r.byID, id)
	}
}

// Len is how many responses are remembered.
func (r *Responses) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.order.Len()
}

// Routes registers the routes that name a stored response — retrieve,
// delete, cancel, input items — all served by h.
func Routes(e *echo.Echo, h echo.HandlerFunc) {
	e.GET("/v1/responses/:id", h)
	e.DELETE("/v1/responses/:id", h)
	e.POST("/v1/responses/:id/cancel", h)
	e.GET("/v1/responses/:id/input_items", h)
}

// Request is the runtime request (of gateway request id requestID) of
// r, a request naming stored response id on one of the Routes, made with
// owner's key: tunnelled as it came (method, path and query) to the
// provider that keeps the response, and charged nothing. A response
// unknown to the edge (for that key) is a 404. A retrieve whose body asks
// for the response's events (body is r's, read; the Go SDK sends
// {"stream":true} with its GET) asks in the query, the API's parameter.
func (rs *Responses) Request(r *http.Request, body []byte, id, owner, requestID string) (*streamgate.Request, *openai.Error) {
	e, ok := rs.Lookup(id, owner)
	if !ok {
		return nil, &openai.Error{Status: http.StatusNotFound, Type: openai.TypeInvalidRequest,
			Message: "No response with id '" + ids.Clip(id) + "' is known to this gateway: iop sends a stored response's requests to the provider that made it, which it learns when the response passes through it (for the key that asked for it)."}
	}
	u := *r.URL
	q := u.Query()
	if r.Method == http.MethodGet && !q.Has("stream") && streamInBody(body) {
		q.Set("stream", "true")
		u.RawQuery = q.Encode()
	}
	t := &execution.ProviderTunnelRequest{RunID: ids.NewWith("run_"), Model: e.Model, Method: r.Method, Path: u.RequestURI(),
		Header: httphdr.ForUpstream(r.Header, httphdr.CredentialScoped...)}
	return &streamgate.Request{Surface: surface.Responses, Model: e.Model, Need: streamgate.NeedTunnel, Pin: e.Provider, Uncharged: true, RequestID: requestID,
		Stream: q.Get("stream") == "true", Work: streamgate.Work{Tunnel: t}}, nil
}

// streamInBody reports whether a request body is a JSON object with
// stream true.
func streamInBody(body []byte) bool {
	var b struct {
		Stream bool `json:"stream"`
	}
	return len(body) > 0 && json.Unmarshal(body, &b) == nil && b.Stream
}

// Pin sends a new response continuing stored response id
// (previous_response_id) to the provider that keeps it, and to no
// fallback model; a response unknown to the edge routes as usual.
func (rs *Responses) Pin(sreq *streamgate.Request, id, owner string) {
	if id == "" {
		return
	}
	if e, ok := rs.Lookup(id, owner); ok && e.Model == sreq.Model {
		sreq.Pin, sreq.Fallbacks = e.Provider, nil
	}
}

// Settle learns from a request's end: a Responses answer passed on is
// remembered where it came from; a stored response deleted is forgotten.
func (rs *Responses) Settle(owner string, sreq *streamgate.Request, sum *streamgate.Summary) {
	if sum.Outcome != "ok" || sreq.Surface != surface.Responses {
		return
	}
	if t := sreq.Work.Tunnel; t != nil && t.Method == http.MethodDelete {
		path, _, _ := strings.Cut(t.Path, "?")
		rs.Forget(strings.TrimPrefix(path, "/v1/responses/"))
		return
	}
	if sum.ResponseID != "" && sum.Provider != "" {
		rs.Remember(sum.ResponseID, Entry{Owner: owner, Model: sreq.Model, Provider: sum.Provider})
	}
}
