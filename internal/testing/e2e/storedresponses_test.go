package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/nodeagent"
)

// keeper is an OpenAI-compatible upstream that stores its responses, as
// OpenAI and vLLM do: another keeper does not know them.
type keeper struct {
	name  string
	mu    sync.Mutex
	byID  map[string]map[string]any
	input map[string]string
	n     int
	named atomic.Int64 // requests naming a stored response (retrieve, delete, cancel, items)
}

func newKeeper(t *testing.T, name string) (*keeper, string) {
	k := &keeper{name: name, byID: map[string]map[string]any{}, input: map[string]string{}}
	srv := httptest.NewServer(k)
	t.Cleanup(srv.Close)
	return k, srv.URL + "/v1"
}

func (k *keeper) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k.mu.Lock()
	defer k.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch rest, named := strings.CutPrefix(r.URL.Path, "/v1/responses/"); {
	case r.URL.Path == "/v1/models":
		_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"r","object":"model","created":0,"owned_by":"k"}]}`))
	case r.URL.Path == "/v1/responses" && r.Method == http.MethodPost:
		k.create(w, r)
	case r.URL.Path == "/v1/responses/input_tokens" && r.Method == http.MethodPost:
		k.count(w, r)
	case named:
		k.named.Add(1)
		id, sub, _ := strings.Cut(rest, "/")
		resp, ok := k.byID[id]
		switch {
		case !ok:
			w.WriteHeader(http.StatusNotFound)
			_, _ = fmt.Fprintf(w, `{"error":{"message":"Response with id '%s' not found.","type":"invalid_request_error","param":null,"code":null}}`, id)
		case r.Method == http.MethodDelete && sub == "":
			delete(k.byID, id)
			_, _ = fmt.Fprintf(w, `{"id":%q,"object":"response.deleted","deleted":true}`, id)
		case r.Method == http.MethodGet && sub == "input_items":
			_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "first_id": "msg_in", "last_id": "msg_in", "has_more": false,
				"data": []any{map[string]any{"id": "msg_in", "type": "message", "role": "user", "status": "completed",
					"content": []any{map[string]any{"type": "input_text", "text": k.input[id]}}}}})
		case r.Method == http.MethodGet && sub == "" && r.URL.Query().Get("stream") == "true":
			// OpenAI replays a stored response's events: here its two ends.
			w.Header().Set("Content-Type", "text/event-stream")
			for i, typ := range []string{"response.created", "response.completed"} {
				b, _ := json.Marshal(map[string]any{"type": typ, "sequence_number": i, "response": resp})
				_, _ = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
			}
		default: // retrieve, cancel
			_ = json.NewEncoder(w).Encode(resp)
		}
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// create answers POST /v1/responses (JSON or stream), continuing a
// stored response when asked to — one this keeper does not have is
// OpenAI's 400.
func (k *keeper) create(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Input    string `json:"input"`
		Stream   bool   `json:"stream"`
		Previous string `json:"previous_response_id"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	text := "from " + k.name
	if req.Previous != "" {
		if _, ok := k.byID[req.Previous]; !ok {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = fmt.Fprintf(w, `{"error":{"message":"Previous response with id '%s' not found.","type":"invalid_request_error","param":"previous_response_id","code":"previous_response_not_found"}}`, req.Previous)
			return
		}
		text += " after " + req.Previous
	}
	k.n++
	id := fmt.Sprintf("resp_%s_%d", k.name, k.n)
	resp := map[string]any{"id": id, "object": "response", "created_at": 1, "status": "completed", "model": "r", "error": nil,
		"incomplete_details": nil, "instructions": nil, "metadata": map[string]any{}, "parallel_tool_calls": true, "temperature": 1.0,
		"tool_choice": "auto", "tools": []any{}, "top_p": 1.0, "store": true, "previous_response_id": nilIfEmpty(req.Previous),
		"output": []any{map[string]any{"id": "msg_" + id, "type": "message", "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}},
		"usage": map[string]any{"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}}
	k.byID[id], k.input[id] = resp, req.Input
	if !req.Stream {
		_ = json.NewEncoder(w).Encode(resp)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	created := map[string]any{}
	for key, v := range resp {
		created[key] = v
	}
	created["status"], created["output"], created["usage"] = "in_progress", []any{}, nil
	for i, ev := range []map[string]any{
		{"type": "response.created", "response": created},
		{"type": "response.output_text.delta", "item_id": "msg_" + id, "output_index": 0, "content_index": 0, "delta": text, "logprobs": []any{}},
		{"type": "response.completed", "response": resp},
	} {
		ev["sequence_number"] = i
		b, _ := json.Marshal(ev)
		_, _ = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev["type"], b)
	}
}

// count answers POST /v1/responses/input_tokens: the stored input it
// continues counts 100, the new input 1; a previous response this keeper
// does not have is OpenAI's 400.
func (k *keeper) count(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Previous string `json:"previous_response_id"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	n := 1
	if req.Previous != "" {
		if _, ok := k.byID[req.Previous]; !ok {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = fmt.Fprintf(w, `{"error":{"message":"Previous response with id '%s' not found.","type":"invalid_request_error","param":"previous_response_id","code":"previous_response_not_found"}}`, req.Previous)
			return
		}
		n += 100
	}
	_, _ = fmt.Fprintf(w, `{"object":"response.input_tokens","input_tokens":%d}`, n)
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// TestStoredResponsesFollowTheirProvider: with two upstreams that each
// keep their own responses behind one model, every request naming a
// stored response — retrieve (JSON or as a stream), input items, cancel, delete, a new
// response continuing it (previous_response_id), JSON or learned from a
// stream, and the token count of one — reaches the upstream that made it (the official SDK, through
// the edge), never the other, which does not know it; another key, an
// unknown id and a deleted response get a 404 without an upstream
// request.
func TestStoredResponsesFollowTheirProvider(t *testing.T) {
	a, aURL := newKeeper(t, "a")
	b, bURL := newKeeper(t, "b")
	c := Start(t, Options{Gateway: func(g *gateway.Config) {
		g.Auth.Keys = []gateway.KeyConfig{{ID: "team", SHA256: gateway.HashToken("sk-team")}, {ID: "other", SHA256: gateway.HashToken("sk-other")}}
	}}, func(*Cluster) []NodeSpec {
		keep := func(id, url string) nodeagent.ProviderConfig {
			return nodeagent.ProviderConfig{ID: id, Adapter: "openai", BaseURL: url, Models: []string{"r"}, Surfaces: []string{"chat", "responses"}, Capacity: 8}
		}
		return []NodeSpec{{ID: "n1", Providers: []nodeagent.ProviderConfig{keep("a", aURL)}}, {ID: "n2", Providers: []nodeagent.ProviderConfig{keep("b", bURL)}}}
	})
	team := oai.NewClient(option.WithBaseURL(c.URL+"/v1"), option.WithAPIKey("sk-team"), option.WithMaxRetries(0))
	ctx := t.Context()
	in := func(s string) responses.ResponseNewParamsInputUnion {
		return responses.ResponseNewParamsInputUnion{OfString: oai.String(s)}
	}
	keeperOf := func(r *responses.Response) *keeper {
		if strings.HasPrefix(r.ID, "resp_a_") {
			return a
		}
		return b
	}

	var made []*responses.Response
	for i := range 4 {
		r, err := team.Responses.New(ctx, responses.ResponseNewParams{Model: "r", Input: in(fmt.Sprint("q", i))})
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, r)
	}
	stream := team.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "r", Input: in("streamed")})
	for stream.Next() {
		if ev := stream.Current(); ev.Type == "response.completed" {
			made = append(made, &ev.Response)
		}
	}
	if err := stream.Err(); err != nil || len(made) != 5 {
		t.Fatalf("stream: %v, %d responses", err, len(made))
	}

	for i, r := range made {
		owner := keeperOf(r)
		before := a.named.Load() + b.named.Load()
		got, err := team.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
		if err != nil || got.ID != r.ID || got.OutputText() != r.OutputText() {
			t.Fatalf("retrieve %s: %+v %v", r.ID, got, err)
		}
		replay := team.Responses.GetStreaming(ctx, r.ID, responses.ResponseGetParams{})
		var events []string
		for replay.Next() {
			events = append(events, replay.Current().Type)
		}
		if replay.Err() != nil || len(events) != 2 || events[1] != "response.completed" {
			t.Fatalf("retrieve %s as a stream: %v %v", r.ID, events, replay.Err())
		}
		items, err := team.Responses.InputItems.List(ctx, r.ID, responses.InputItemListParams{})
		if err != nil || len(items.Data) != 1 {
			t.Fatalf("input items of %s: %+v %v", r.ID, items, err)
		}
		if _, err := team.Responses.Cancel(ctx, r.ID); err != nil {
			t.Fatalf("cancel %s: %v", r.ID, err)
		}
		if d := a.named.Load() + b.named.Load() - before; d != 4 || owner.named.Load() < 4 {
			t.Fatalf("%s: %d requests named it, its keeper saw %d of them", r.ID, d, owner.named.Load())
		}
		next, err := team.Responses.New(ctx, responses.ResponseNewParams{Model: "r", Input: in("more"), PreviousResponseID: oai.String(r.ID)})
		if err != nil || next.OutputText() != "from "+owner.name+" after "+r.ID {
			t.Fatalf("continuing %s (%d): %+v %v", r.ID, i, next, err)
		}
		count, err := team.Responses.InputTokens.Count(ctx, responses.InputTokenCountParams{Model: oai.String("r"), PreviousResponseID: oai.String(r.ID),
			Input: responses.InputTokenCountParamsInputUnion{OfString: oai.String("more")}})
		if err != nil || count.InputTokens != 101 {
			t.Fatalf("counting a continuation of %s: %+v %v", r.ID, count, err)
		}
	}

	other := oai.NewClient(option.WithBaseURL(c.URL+"/v1"), option.WithAPIKey("sk-other"), option.WithMaxRetries(0))
	before := a.named.Load() + b.named.Load()
	var apiErr *oai.Error
	if _, err := other.Responses.Get(ctx, made[0].ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Fatalf("another key's retrieve: %v", err)
	}
	if _, err := team.Responses.Get(ctx, "resp_unknown", responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Fatalf("an unknown id: %v", err)
	}
	if err := team.Responses.Delete(ctx, made[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := team.Responses.Get(ctx, made[0].ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Fatalf("a deleted response: %v", err)
	}
	if n := a.named.Load() + b.named.Load() - before; n != 1 {
		t.Fatalf("%d upstream requests, want the delete's only", n)
	}
}
