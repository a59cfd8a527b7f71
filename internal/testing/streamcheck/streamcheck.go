// Package streamcheck checks, for tests and fuzz targets, the one invariant
// every stream translator must keep: what the client receives is a valid
// Chat Completions SSE sequence that ends with exactly one terminal — a
// finish chunk followed by data: [DONE], or one in-band error event.
package streamcheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	sse "github.com/tmaxmax/go-sse"

	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/execution"
)

// Execution checks what a translator produced for one execution: the events
// it emitted and the error it returned. Exactly one of "one terminal event
// emitted" and "an error returned" must hold, and no event may follow a
// terminal. It then renders the execution as the client would receive it
// and checks that stream with Chat.
func Execution(evs []execution.RunEvent, err error) error {
	terminals := 0
	for i, ev := range evs {
		if !ev.Type.IsTerminal() {
			continue
		}
		terminals++
		if i != len(evs)-1 {
			return fmt.Errorf("event %d (%s) follows the terminal %s", i+1, evs[i+1].Type, ev.Type)
		}
	}
	switch {
	case terminals > 1:
		return fmt.Errorf("%d terminal events", terminals)
	case terminals == 1 && err != nil:
		return fmt.Errorf("a terminal event and an error (%v)", err)
	case terminals == 0 && err == nil:
		return fmt.Errorf("no terminal event and no error: a silent end")
	}
	return Chat(Render(evs, err))
}

// Render renders an execution as a chat SSE stream, the way the edge does
// on the normalized path: a failed or errored execution ends with one
// in-band error event.
func Render(evs []execution.RunEvent, err error) []byte {
	cs := openai.NewChatStream("chatcmpl-check", "m", 1, true)
	var out []byte
	for _, ev := range evs {
		out = cs.Append(out, ev)
		if ev.Type == execution.EventTypeError || ev.Type == execution.EventTypeCancelled {
			err = fmt.Errorf("%s", ev.Error)
		}
	}
	if err != nil {
		out = cs.AppendError(out, &openai.Error{Type: openai.TypeUpstream, Code: "upstream_error", Message: err.Error()})
	}
	return out
}

// Chat checks a client-side chat SSE stream: every event is a JSON object
// or [DONE]; exactly one terminal ends it; a [DONE] is preceded by a chunk
// carrying a finish_reason.
func Chat(stream []byte) error {
	var finished, terminal bool
	n := 0
	for ev, err := range sse.Read(bytes.NewReader(stream), &sse.ReadConfig{MaxEventSize: 64 << 20}) {
		if err != nil {
			return fmt.Errorf("unparsable SSE: %w", err)
		}
		n++
		if terminal {
			return fmt.Errorf("event %d after the terminal: %.80q", n, ev.Data)
		}
		if ev.Data == "[DONE]" {
			if !finished {
				return fmt.Errorf("[DONE] without a finish_reason")
			}
			terminal = true
			continue
		}
		var c struct {
			Error   json.RawMessage `json:"error"`
			Choices []struct {
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &c); err != nil {
			return fmt.Errorf("event %d is not JSON: %v", n, err)
		}
		if len(c.Error) > 0 {
			terminal = true
			continue
		}
		for _, ch := range c.Choices {
			if ch.FinishReason != nil {
				finished = true
			}
		}
	}
	if !terminal {
		return fmt.Errorf("stream of %d events ends without a terminal", n)
	}
	return nil
}

// Splitter is an io.Reader over data that returns it in pieces whose sizes
// come from cuts, so a fuzzer explores every split point.
type Splitter struct {
	Data []byte
	Cuts []byte
	i    int
}

// Read implements io.Reader.
func (s *Splitter) Read(p []byte) (int, error) {
	if len(s.Data) == 0 {
		return 0, io.EOF
	}
	n := len(s.Data)
	if len(s.Cuts) > 0 {
		n = int(s.Cuts[s.i%len(s.Cuts)]) + 1
		s.i++
	}
	n = min(n, len(p), len(s.Data))
	copy(p, s.Data[:n])
	s.Data = s.Data[n:]
	return n, nil
}

// Responses checks a client-side Responses API SSE stream: every event is
// a JSON object whose type matches its event name, sequence_number counts
// up from 0 without gaps, and exactly one terminal (response.completed,
// response.incomplete or response.failed) ends it; an error event may only
// come right before response.failed.
func Responses(stream []byte) error {
	n, terminal, lastType := 0, false, ""
	for ev, err := range sse.Read(bytes.NewReader(stream), &sse.ReadConfig{MaxEventSize: 64 << 20}) {
		if err != nil {
			return fmt.Errorf("unparsable SSE: %w", err)
		}
		if terminal {
			return fmt.Errorf("event %q after the terminal", ev.Type)
		}
		var e struct {
			Type string `json:"type"`
			Seq  *int   `json:"sequence_number"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &e); err != nil {
			return fmt.Errorf("event %d is not JSON: %v", n, err)
		}
		if ev.Type != "" && ev.Type != e.Type {
			return fmt.Errorf("event name %q carries type %q", ev.Type, e.Type)
		}
		if e.Seq == nil || *e.Seq != n {
			return fmt.Errorf("event %d (%s) has sequence_number %v", n, e.Type, e.Seq)
		}
		if lastType == "error" && e.Type != "response.failed" {
			return fmt.Errorf("error event followed by %s", e.Type)
		}
		switch e.Type {
		case "response.completed", "response.incomplete", "response.failed":
			terminal = true
		}
		lastType = e.Type
		n++
	}
	if !terminal {
		return fmt.Errorf("stream of %d events ends without a terminal", n)
	}
	return nil
}
