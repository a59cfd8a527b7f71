package sim

import (
	"encoding/json"
	"slices"
	"strings"
)

// instance is a value that conforms to a JSON schema, derived
// deterministically from the schema and words (the prompt's): every
// property (required ones first), the first enum or const, the declared
// type (the first non-null of a list, the first option of anyOf/oneOf),
// min/max bounds on numbers, lengths and item counts, $ref into $defs or
// definitions, a few string formats. Frameworks that validate tool
// arguments or structured answers against their schema accept it.
func instance(schema json.RawMessage, words string) json.RawMessage {
	var root map[string]any
	if json.Unmarshal(schema, &root) != nil {
		root = map[string]any{}
	}
	g := &generator{root: root, words: words}
	out, _ := json.Marshal(g.value(root, 0))
	return out
}

type generator struct {
	root  map[string]any
	words string
}

const maxSchemaDepth = 12

func (g *generator) value(s map[string]any, depth int) any {
	if depth > maxSchemaDepth {
		return nil
	}
	s = g.resolve(s)
	if c, ok := s["const"]; ok {
		return c
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if opts, ok := s[k].([]any); ok {
			for _, o := range opts {
				if om, ok := o.(map[string]any); ok && typeOf(g.resolve(om)) != "null" {
					return g.value(om, depth+1)
				}
			}
		}
	}
	if all, ok := s["allOf"].([]any); ok && len(all) > 0 {
		return g.value(merge(g, all), depth+1)
	}
	switch typeOf(s) {
	case "object":
		return g.object(s, depth)
	case "array":
		return g.array(s, depth)
	case "string":
		return g.str(s)
	case "integer":
		return int64(bound(s, 1))
	case "number":
		return bound(s, 1)
	case "boolean":
		return true
	case "null":
		return nil
	}
	return g.str(s)
}

// resolve follows a local $ref.
func (g *generator) resolve(s map[string]any) map[string]any {
	for range maxSchemaDepth {
		ref, ok := s["$ref"].(string)
		if !ok {
			return s
		}
		var next any = g.root
		for _, part := range strings.Split(strings.TrimPrefix(ref, "#"), "/") {
			if part == "" {
				continue
			}
			m, _ := next.(map[string]any)
			next = m[strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")]
		}
		m, ok := next.(map[string]any)
		if !ok {
			return map[string]any{}
		}
		s = m
	}
	return s
}

func typeOf(s map[string]any) string {
	switch t := s["type"].(type) {
	case string:
		return t
	case []any:
		for _, x := range t {
			if x, ok := x.(string); ok && x != "null" {
				return x
			}
		}
		return "null"
	}
	if _, ok := s["properties"]; ok {
		return "object"
	}
	if _, ok := s["items"]; ok {
		return "array"
	}
	return ""
}

func (g *generator) object(s map[string]any, depth int) map[string]any {
	props, _ := s["properties"].(map[string]any)
	out := make(map[string]any, len(props))
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if p, ok := props[k].(map[string]any); ok {
			out[k] = g.value(p, depth+1)
		}
	}
	if req, ok := s["required"].([]any); ok { // a required property the schema does not describe
		for _, r := range req {
			if k, ok := r.(string); ok {
				if _, has := out[k]; !has {
					out[k] = g.words
				}
			}
		}
	}
	return out
}

func (g *generator) array(s map[string]any, depth int) []any {
	n := max(int(num(s, "minItems", 1)), 1)
	if mx, ok := s["maxItems"].(float64); ok && int(mx) < n {
		n = int(mx)
	}
	items, _ := s["items"].(map[string]any)
	out := make([]any, n)
	for i := range out {
		out[i] = g.value(items, depth+1)
	}
	return out
}

func (g *generator) str(s map[string]any) string {
	v := g.words
	switch s["format"] {
	case "date-time":
		v = "2026-01-01T00:00:00Z"
	case "date":
		v = "2026-01-01"
	case "time":
		v = "00:00:00Z"
	case "email":
		v = "sim@example.com"
	case "uri", "url":
		v = "https://example.com/"
	case "uuid":
		v = "00000000-0000-4000-8000-000000000000"
	}
	if v == "" {
		v = "sim"
	}
	for n := int(num(s, "minLength", 0)); len(v) < n; {
		v += " sim"
	}
	if mx, ok := s["maxLength"].(float64); ok && len(v) > int(mx) {
		v = v[:int(mx)]
	}
	return v
}

// bound is a number within the schema's bounds, def when it sets none.
func bound(s map[string]any, def float64) float64 {
	v := def
	if m, ok := s["minimum"].(float64); ok {
		v = m
	}
	if m, ok := s["exclusiveMinimum"].(float64); ok && v <= m {
		v = m + 1
	}
	if m, ok := s["maximum"].(float64); ok && v > m {
		v = m
	}
	if m, ok := s["exclusiveMaximum"].(float64); ok && v >= m {
		v = m - 1
	}
	return v
}

func num(s map[string]any, k string, def float64) float64 {
	if v, ok := s[k].(float64); ok {
		return v
	}
	return def
}

// merge is allOf's schemas as one: their properties and required lists.
func merge(g *generator, all []any) map[string]any {
	props, req := map[string]any{}, []any{}
	out := map[string]any{}
	for _, x := range all {
		m, ok := x.(map[string]any)
		if !ok {
			continue
		}
		m = g.resolve(m)
		for k, v := range m {
			out[k] = v
		}
		if p, ok := m["properties"].(map[string]any); ok {
			for k, v := range p {
				props[k] = v
			}
		}
		if r, ok := m["required"].([]any); ok {
			req = append(req, r...)
		}
	}
	if len(props) > 0 {
		out["properties"], out["required"] = props, req
	}
	return out
}
