package openai

import (
	"bytes"
	"encoding/json"
)

// marshal is json.Marshal without HTML escaping: model text like "<b>"
// stays as written instead of becoming "\u003cb\u003e".
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
