package openai

import "testing"

// TestWithModelChangesOnlyTheModel: the replaced body keeps every other
// byte — key order, spacing, escapes, numbers — as the client sent it.
func TestWithModelChangesOnlyTheModel(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"stream":true, "model" : "a",  "z":1.50e1,"m":"\u00e9"}`, `{"stream":true, "model" : "b",  "z":1.50e1,"m":"\u00e9"}`},
		{`{"messages":[{"model":"inner"}],"model":"a"}`, `{"messages":[{"model":"inner"}],"model":"b"}`},
		{`{"input":"x"}`, `{"model":"b","input":"x"}`},
		{`{ }`, `{"model":"b" }`},
	} {
		got, err := WithModel([]byte(tc.in), "b")
		if err != nil || string(got) != tc.want {
			t.Errorf("WithModel(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	if _, err := WithModel([]byte(`[1]`), "b"); err == nil {
		t.Error("a non-object body was rewritten")
	}
}
