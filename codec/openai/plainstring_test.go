package openai

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestPlainStringMatchesTheDecoder: a content string read without a
// decoding pass is exactly what encoding/json decodes; a literal with
// escapes takes the decoder; CheckChatRequest checks it and keeps none.
func TestPlainStringMatchesTheDecoder(t *testing.T) {
	for _, lit := range []string{`""`, `"hi"`, `"héllo 世界 🙂"`, `"a\nb"`, `"q\"uote"`, `"\u00e9"`, `"back\\slash"`} {
		var want string
		if err := json.Unmarshal([]byte(lit), &want); err != nil {
			t.Fatal(err)
		}
		ok := isPlainString(json.RawMessage(lit))
		if ok != !strings.Contains(lit[1:len(lit)-1], `\`) || ok && lit[1:len(lit)-1] != want {
			t.Errorf("%s: plain %v, want %q", lit, ok, want)
		}
		body := []byte(`{"model":"m","messages":[{"role":"user","content":` + lit + `}]}`)
		r, e := DecodeChatRequest(body, Limits{})
		if e != nil || r.Messages[0].Content != want {
			t.Errorf("%s decoded as %q (%v)", lit, r.Messages[0].Content, e)
		}
		if c, e := CheckChatRequest(body, Limits{}); e != nil || c.Messages != nil || c.Model != "m" {
			t.Errorf("%s checked: %+v (%v)", lit, c, e)
		}
	}
}
