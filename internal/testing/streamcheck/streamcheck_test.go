package streamcheck

import (
	"errors"
	"testing"

	"github.com/iopgw/iop/execution"
)

func TestChat(t *testing.T) {
	ok := "data: {\"choices\":[{\"delta\":{\"content\":\"a\"},\"finish_reason\":null}]}\n\n" +
		"data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"
	for name, tc := range map[string]struct {
		in    string
		valid bool
	}{
		"complete":            {ok, true},
		"in-band error":       {"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"error\":{\"message\":\"x\"}}\n\n", true},
		"no terminal":         {"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n", false},
		"done without finish": {"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n\n", false},
		"event after done":    {ok + "data: {\"choices\":[]}\n\n", false},
		"two terminals":       {"data: {\"error\":{}}\n\ndata: {\"error\":{}}\n\n", false},
		"not json":            {"data: {\"choices\":\n\n", false},
	} {
		if err := Chat([]byte(tc.in)); (err == nil) != tc.valid {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestResponses(t *testing.T) {
	ev := func(typ string, seq string) string {
		return "event: " + typ + "\ndata: {\"type\":\"" + typ + "\",\"sequence_number\":" + seq + "}\n\n"
	}
	for name, tc := range map[string]struct {
		in    string
		valid bool
	}{
		"completed":          {ev("response.created", "0") + ev("response.completed", "1"), true},
		"failed after error": {ev("response.created", "0") + ev("error", "1") + ev("response.failed", "2"), true},
		"gap":                {ev("response.created", "0") + ev("response.completed", "2"), false},
		"no terminal":        {ev("response.created", "0"), false},
		"error then created": {ev("error", "0") + ev("response.created", "1"), false},
		"name mismatch":      {"event: a\ndata: {\"type\":\"b\",\"sequence_number\":0}\n\n", false},
	} {
		if err := Responses([]byte(tc.in)); (err == nil) != tc.valid {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestExecution(t *testing.T) {
	delta := execution.RunEvent{Type: execution.EventTypeDelta, Delta: "a"}
	done := execution.RunEvent{Type: execution.EventTypeComplete}
	if err := Execution([]execution.RunEvent{delta, done}, nil); err != nil {
		t.Fatal(err)
	}
	if err := Execution([]execution.RunEvent{delta}, errors.New("cut")); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		evs []execution.RunEvent
		err error
	}{
		"silent end":          {[]execution.RunEvent{delta}, nil},
		"terminal and error":  {[]execution.RunEvent{done}, errors.New("x")},
		"event after the end": {[]execution.RunEvent{done, delta}, nil},
	} {
		if Execution(tc.evs, tc.err) == nil {
			t.Errorf("%s accepted", name)
		}
	}
}

func TestSplitter(t *testing.T) {
	s := &Splitter{Data: []byte("abcdefg"), Cuts: []byte{0, 2}}
	buf := make([]byte, 10)
	var got []string
	for {
		n, err := s.Read(buf)
		if err != nil {
			break
		}
		got = append(got, string(buf[:n]))
	}
	if len(got) != 4 || got[0] != "a" || got[1] != "bcd" || got[2] != "e" || got[3] != "fg" {
		t.Fatalf("pieces %q", got)
	}
}
