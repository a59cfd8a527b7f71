package wire

import "testing"

// TestSurfaceOfPath: a tunnelled path names its surface, query or not;
// the paths naming a stored response are the Responses API's; any other
// path names none.
func TestSurfaceOfPath(t *testing.T) {
	for path, want := range map[string]string{
		"/v1/chat/completions":                   SurfaceChat,
		"/v1/responses?x=1":                      SurfaceResponses,
		"/v1/responses/resp_1":                   SurfaceResponses,
		"/v1/responses/resp_1/cancel":            SurfaceResponses,
		"/v1/responses/resp_1/input_items?after": SurfaceResponses,
		"/v1/messages/count_tokens":              SurfaceMessages,
		"/v1/files":                              "",
		"/v1/responsesx":                         "",
		"/api/chat":                              "",
	} {
		if got := SurfaceOfPath(path); got != want {
			t.Errorf("SurfaceOfPath(%q) = %q, want %q", path, got, want)
		}
	}
}
