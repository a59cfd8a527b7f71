package jsonstrict

import (
	"bytes"
	"encoding/json"
)

// Marshal is json.Marshal without HTML escaping, for rendering responses:
// model text like "<b>" stays as written instead of becoming
// "\u003cb\u003e", so a rendered answer carries the provider's bytes.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
