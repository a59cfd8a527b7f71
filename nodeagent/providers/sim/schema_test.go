package sim

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/iopgw/iop/execution"
)

// TestInstanceFollowsTheSchema: enums, consts, bounds, nested objects,
// arrays, $ref, nullable types and formats all come out valid.
func TestInstanceFollowsTheSchema(t *testing.T) {
	schema := `{"type":"object","required":["city","unit"],"properties":{
	 "city":{"type":"string","minLength":5},
	 "unit":{"type":"string","enum":["celsius","fahrenheit"]},
	 "days":{"type":"integer","minimum":1,"maximum":7},
	 "ratio":{"type":"number","exclusiveMinimum":0,"maximum":0.5},
	 "when":{"type":"string","format":"date-time"},
	 "tags":{"type":"array","items":{"type":"string"},"minItems":2},
	 "place":{"$ref":"#/$defs/place"},
	 "note":{"type":["string","null"],"maxLength":3},
	 "kind":{"const":"forecast"},
	 "alt":{"anyOf":[{"type":"null"},{"type":"boolean"}]}},
	 "$defs":{"place":{"type":"object","properties":{"lat":{"type":"number"},"code":{"type":"string","format":"uuid"}},"required":["lat"]}}}`
	var got map[string]any
	if err := json.Unmarshal(instance(json.RawMessage(schema), "Paris"), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"city": "Paris", "unit": "celsius", "days": 1.0, "ratio": 0.5, "when": "2026-01-01T00:00:00Z",
		"tags": []any{"Paris", "Paris"}, "place": map[string]any{"lat": 1.0, "code": "00000000-0000-4000-8000-000000000000"},
		"note": "Par", "kind": "forecast", "alt": true}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("instance %v\nwant     %v", got, want)
	}
}

// TestSimFollowsToolAndFormatSchemas: a tool call's arguments follow the
// chosen tool's schema (tool_choice may name one), and a response format
// — Chat's json_schema, Responses' text.format, Ollama's format schema,
// JSON mode — gets a conforming JSON answer.
func TestSimFollowsToolAndFormatSchemas(t *testing.T) {
	p := New(Config{Models: []string{"iop-sim"}, TokenLatency: time.Microsecond})
	text := func(evs []execution.RunEvent) (out string) {
		for _, ev := range evs {
			out += ev.Delta
			for _, tc := range ev.ToolCalls {
				out += tc.Arguments
			}
		}
		return out
	}
	r := req("weather in Paris")
	r.Params.Tools = []byte(`[{"type":"function","function":{"name":"a","parameters":{"type":"object","properties":{"x":{"type":"integer"}}}}},
	 {"type":"function","name":"b","parameters":{"type":"object","required":["q"],"properties":{"q":{"type":"string"}}}}]`)
	r.Params.ToolChoice = []byte(`{"type":"function","function":{"name":"b"}}`)
	evs, _ := execute(t, p, r, time.Second)
	if evs[1].ToolCalls[0].Name != "b" || text(evs) != `{"q":"weather in Paris"}` {
		t.Fatalf("tool call %q %q", evs[1].ToolCalls[0].Name, text(evs))
	}
	r.Params.Tools = []byte(`[{"name":"c","input_schema":{"type":"object","properties":{"n":{"type":"number"}}}}]`) // the Messages API's shape
	r.Params.ToolChoice = nil
	if evs, _ := execute(t, p, r, time.Second); text(evs) != `{"n":1}` {
		t.Fatalf("messages tool %q", text(evs))
	}
	r.Params.Tools = nil
	schema := `{"type":"object","required":["answer"],"properties":{"answer":{"type":"string"},"score":{"type":"integer","minimum":3}}}`
	for _, format := range []string{
		`{"type":"json_schema","json_schema":{"name":"o","strict":true,"schema":` + schema + `}}`, // Chat
		`{"type":"json_schema","name":"o","schema":` + schema + `}`,                               // Responses
		schema, // Ollama
	} {
		r.Params.ResponseFormat = json.RawMessage(format)
		evs, _ := execute(t, p, r, time.Second)
		if got := text(evs); got != `{"answer":"weather in Paris","score":3}` {
			t.Errorf("format %s: %q", format, got)
		}
	}
	for _, format := range []string{`{"type":"json_object"}`, `"json"`} {
		r.Params.ResponseFormat = json.RawMessage(format)
		evs, _ := execute(t, p, r, time.Second)
		var v map[string]string
		if err := json.Unmarshal([]byte(text(evs)), &v); err != nil || !strings.HasPrefix(v["answer"], "You said") {
			t.Errorf("JSON mode %s: %q", format, text(evs))
		}
	}
}
