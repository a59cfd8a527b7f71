package eventstream

import (
	"strings"
	"testing"
)

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

// TestObservedResponseID: a Responses stream's response id is its
// events' response.id — the first seen, in any framing (spaced JSON,
// CRLF, comments, split across reads) — and a whole answer's is its
// top-level id when it is a response object; an implausibly long id is
// none.
func TestObservedResponseID(t *testing.T) {
	long := `"resp_` + strings.Repeat("x", 300) + `"`
	for _, tc := range []struct{ name, stream, id string }{
		{"created then completed", "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\"}}\n\n" +
			"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"status\":\"completed\"}}\n\n", "resp_1"},
		{"spaced, CRLF, a comment", ": keep-alive\r\n\r\nevent: response.created\r\ndata: { \"type\" : \"response.created\" , \"response\" : { \"id\" : \"resp_2\" } }\r\n\r\n", "resp_2"},
		{"the first id counts", "data: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_3\"}}\n\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_other\"}}\n\n", "resp_3"},
		{"no response member", "data: {\"type\":\"response.output_text.delta\",\"delta\":\"resp_4\"}\n\n", ""},
		{"an id that is no string", "data: {\"type\":\"response.created\",\"response\":{\"id\":5}}\n\n", ""},
		{"too long", "data: {\"type\":\"response.created\",\"response\":{\"id\":" + long + "}}\n\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewObserver(DialectResponses, FormatSSE)
			for i := 0; i < len(tc.stream); i += 7 {
				o.Feed([]byte(tc.stream[i:min(i+7, len(tc.stream))]))
			}
			o.Close()
			if o.ResponseID != tc.id {
				t.Errorf("ResponseID %q, want %q", o.ResponseID, tc.id)
			}
		})
	}
	for body, id := range map[string]string{
		`{"id":"resp_5","object":"response","status":"completed"}`:   "resp_5",
		`{ "object" : "response" , "id" : "resp_6" }`:                "resp_6",
		`{"id":"resp_7","object":"response.deleted","deleted":true}`: "",
		`{"object":"list","data":[{"id":"msg_1"}]}`:                  "",
		`{"id":` + long + `,"object":"response"}`:                    "",
		`not json`: "",
	} {
		if got := ReadAnswer([]byte(body)).ResponseID; got != id {
			t.Errorf("ReadAnswer(%s)'s id = %q, want %q", body, got, id)
		}
	}
}
