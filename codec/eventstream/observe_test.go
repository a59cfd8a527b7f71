package eventstream

import "testing"

// TestObservedChatTerminal: a Chat stream is done when [DONE] arrives or
// every choice it carried has a finish_reason; an error event ends it as
// the upstream's error, in either shape. The first of duplicated members
// counts, as a JSON lookup would read it.
func TestObservedChatTerminal(t *testing.T) {
	tests := []struct {
		name    string
		events  []string
		done    bool
		errType string
	}{
		{"one choice finishes", []string{`{"choices":[{"index":0,"delta":{"content":"a"}}]}`, `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`}, true, ""},
		{"two choices, one finished", []string{`{"choices":[{"index":0,"delta":{}},{"index":1,"delta":{}}]}`, `{"choices":[{"index":1,"finish_reason":"stop"}]}`}, false, ""},
		{"two choices, both finished apart", []string{`{"choices":[{"index":0,"delta":{}},{"index":1,"delta":{}}]}`, `{"choices":[{"index":1,"finish_reason":"stop"}]}`, `{"choices":[{"index":0,"finish_reason":"length"}]}`}, true, ""},
		{"a choice first seen finished", []string{`{"choices":[{"index":2,"finish_reason":"stop"}]}`}, true, ""},
		{"a later choice reopens nothing", []string{`{"choices":[{"index":0,"finish_reason":"stop"}]}`, `{"choices":[{"index":0,"delta":{"content":"late"}}]}`}, true, ""},
		{"empty choices end nothing", []string{`{"choices":[]}`}, false, ""},
		{"error member", []string{`{"error":{"message":"boom","type":"server_error"}}`}, false, "server_error"},
		{"object error", []string{`{"object":"error","message":"boom","type":"overloaded_error","code":529}`}, false, "overloaded_error"},
		{"null error is none", []string{`{"error":null,"choices":[{"index":0,"finish_reason":"stop"}]}`}, true, ""},
		{"first duplicate choices counts", []string{`{"choices":[{"index":0,"delta":{}}],"choices":[{"index":0,"finish_reason":"stop"}]}`}, false, ""},
		{"first duplicate object counts", []string{`{"object":"chat.completion.chunk","object":"error","choices":[]}`}, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewObserver(DialectChat, FormatSSE)
			for _, ev := range tt.events {
				o.Feed([]byte("data: " + ev + "\n\n"))
			}
			if o.Done != tt.done {
				t.Errorf("Done %v, want %v", o.Done, tt.done)
			}
			switch {
			case tt.errType == "" && o.Err != nil:
				t.Errorf("error %+v, want none", o.Err)
			case tt.errType != "" && (o.Err == nil || o.Err.Type != tt.errType):
				t.Errorf("error %+v, want type %q", o.Err, tt.errType)
			}
			if o.Malformed != 0 {
				t.Errorf("%d malformed", o.Malformed)
			}
		})
	}
}
