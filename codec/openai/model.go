package openai

import (
	"bytes"
	"encoding/json"
	"errors"
)

// WithModel returns body with its top-level "model" value replaced and
// every other byte unchanged (a body without one gets it first). The body
// was validated strictly (no duplicate keys), so the edge and the
// provider see the same request apart from the model.
func WithModel(body []byte, model string) ([]byte, error) {
	mb, err := json.Marshal(model)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("the body is not a JSON object")
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if k == "model" {
			end := int(dec.InputOffset())
			start := end - len(v)
			return append(append(append(make([]byte, 0, len(body)-len(v)+len(mb)), body[:start]...), mb...), body[end:]...), nil
		}
	}
	open := bytes.IndexByte(body, '{') + 1
	sep := []byte(",")
	if len(bytes.TrimSpace(body[open:])) > 0 && bytes.TrimSpace(body[open:])[0] == '}' {
		sep = nil
	}
	out := append(append([]byte{}, body[:open]...), `"model":`...)
	out = append(append(append(out, mb...), sep...), body[open:]...)
	return out, nil
}
