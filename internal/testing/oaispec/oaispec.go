// Package oaispec validates JSON values against OpenAI's published schemas
// (a subset of github.com/openai/openai-openapi extracted by
// extract_schemas.py into openai-schemas.json). Tests use it to prove that
// what iop renders is what OpenAI's specification defines.
package oaispec

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"sort"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
)

//go:embed openai-schemas.json
var schemasJSON []byte

var (
	loadOnce sync.Once
	doc      *openapi3.T
	loadErr  error
)

func load() (*openapi3.T, error) {
	loadOnce.Do(func() {
		doc, loadErr = openapi3.NewLoader().LoadFromData(schemasJSON)
	})
	return doc, loadErr
}

// Validate checks the JSON document body against the named schema.
func Validate(schema string, body []byte) error {
	d, err := load()
	if err != nil {
		return fmt.Errorf("load OpenAI schemas: %w", err)
	}
	ref, ok := d.Components.Schemas[schema]
	if !ok || ref.Value == nil {
		return fmt.Errorf("no schema %q in the extracted subset", schema)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if err := ref.Value.VisitJSON(v, openapi3.MultiErrors()); err != nil {
		return fmt.Errorf("%s: %w", schema, err)
	}
	return nil
}

// ResponseEventSchema returns the schema name for a Responses stream event
// type, e.g. response.output_text.delta → ResponseTextDeltaEvent.
func ResponseEventSchema(typ string) (string, bool) {
	s, ok := responseEvents[typ]
	return s, ok
}

var responseEvents = map[string]string{
	"response.created":                       "ResponseCreatedEvent",
	"response.in_progress":                   "ResponseInProgressEvent",
	"response.completed":                     "ResponseCompletedEvent",
	"response.failed":                        "ResponseFailedEvent",
	"response.incomplete":                    "ResponseIncompleteEvent",
	"response.output_item.added":             "ResponseOutputItemAddedEvent",
	"response.output_item.done":              "ResponseOutputItemDoneEvent",
	"response.content_part.added":            "ResponseContentPartAddedEvent",
	"response.content_part.done":             "ResponseContentPartDoneEvent",
	"response.output_text.delta":             "ResponseTextDeltaEvent",
	"response.output_text.done":              "ResponseTextDoneEvent",
	"response.function_call_arguments.delta": "ResponseFunctionCallArgumentsDeltaEvent",
	"response.function_call_arguments.done":  "ResponseFunctionCallArgumentsDoneEvent",
	"response.reasoning_text.delta":          "ResponseReasoningTextDeltaEvent",
	"response.reasoning_text.done":           "ResponseReasoningTextDoneEvent",
	"error":                                  "ResponseErrorEvent",
}

// Properties returns the top-level property names of the named object
// schema, through allOf compositions, sorted.
func Properties(schema string) ([]string, error) {
	d, err := load()
	if err != nil {
		return nil, fmt.Errorf("load OpenAI schemas: %w", err)
	}
	ref, ok := d.Components.Schemas[schema]
	if !ok || ref.Value == nil {
		return nil, fmt.Errorf("no schema %q in the extracted subset", schema)
	}
	seen := map[string]bool{}
	var walk func(s *openapi3.Schema)
	walk = func(s *openapi3.Schema) {
		for name := range s.Properties {
			seen[name] = true
		}
		for _, sub := range s.AllOf {
			if sub.Value != nil {
				walk(sub.Value)
			}
		}
	}
	walk(ref.Value)
	out := make([]string, 0, len(seen))
	for name := range seen {
		out = append(out, name)
	}
	sort.Strings(out)
	return out, nil
}
