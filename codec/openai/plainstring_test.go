package openai

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestPlainStringMatchesTheDecoder: a content string read without a
// decoding pass is exactly what encoding/json decodes; a literal with
// escapes takes the decoder.
func TestPlainStringMatchesTheDecoder(t *testing.T) {
	for _, lit := range []string{`""`, `"hi"`, `"héllo 世界 🙂"`, `"a\nb"`, `"q\"uote"`, `"\u00e9"`, `"back\\slash"`} {
		var want string
		if err := json.Unmarshal([]byte(lit), &want); err != nil {
			t.Fatal(err)
		}
		got, ok := plainString(json.RawMessage(lit))
		if ok != !strings.Contains(lit[1:len(lit)-1], `\`) || ok && got != want {
			t.Errorf("%s: %q %v, want %q", lit, got, ok, want)
		}
		r, e := DecodeChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":`+lit+`}]}`), Limits{})
		if e != nil || r.Messages[0].Content != want {
			t.Errorf("%s decoded as %q (%v)", lit, r.Messages[0].Content, e)
		}
	}
}
