package ollama

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/iopgw/iop/codec/jsonstrict"
)

// The reasons of Ollama's answer to a request that asks for no
// generation: a generate request with an empty prompt, or a chat request
// without messages, loads the model (`ollama run` sends one before its
// first prompt); with keep_alive 0 it unloads it (`ollama stop`).
const (
	DoneReasonLoad   = "load"
	DoneReasonUnload = "unload"
)

// loadReason is the done reason of a request that generates nothing (""
// when it generates): load, or unload when keep_alive is zero.
func loadReason(generate bool, prompt *string, messages int, keepAlive json.RawMessage) (string, *Error) {
	empty := messages == 0
	if generate {
		empty = prompt == nil || *prompt == ""
	}
	if !empty {
		return "", nil
	}
	d, set, err := parseKeepAlive(keepAlive)
	if err != nil {
		return "", BadRequest("%v", err)
	}
	if set && d == 0 {
		return DoneReasonUnload, nil
	}
	return DoneReasonLoad, nil
}

// forever is a keep_alive that never ends.
const forever = time.Duration(1<<63 - 1)

// parseKeepAlive reads keep_alive as Ollama does: a number of seconds or
// a Go duration string, a negative one meaning forever. set is false
// when the member is absent or null.
func parseKeepAlive(raw json.RawMessage) (d time.Duration, set bool, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, false, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return 0, false, err
	}
	switch t := v.(type) {
	case float64:
		d = forever
		if t < float64(forever)/float64(time.Second) {
			d = time.Duration(t * float64(time.Second))
		}
	case string:
		if d, err = time.ParseDuration(t); err != nil {
			return 0, false, fmt.Errorf("keep_alive: %v", err)
		}
	default:
		return 0, false, fmt.Errorf("keep_alive: unsupported type %T", v)
	}
	if d < 0 {
		d = forever
	}
	return d, true, nil
}

// LoadAnswer is Ollama's answer to a load or unload request of model
// (Request.Load): one JSON object, done, with no text and no usage —
// whether the request asked to stream or not, as Ollama answers it.
func LoadAnswer(model string, generate bool, reason string, now time.Time) []byte {
	b := append([]byte(`{"model":`), jsonstrict.AppendString(nil, model)...)
	b = append(b, `,"created_at":`...)
	b = jsonstrict.AppendString(b, now.UTC().Format(time.RFC3339Nano))
	if generate {
		b = append(b, `,"response":""`...)
	} else {
		b = append(b, `,"message":{"role":"assistant","content":""}`...)
	}
	b = append(b, `,"done":true,"done_reason":`...)
	b = jsonstrict.AppendString(b, reason)
	return append(b, '}')
}
