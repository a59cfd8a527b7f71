package openai

import (
	"encoding/json"
	"testing"
)

func TestUTF16JoinerJoinsSplitCharacters(t *testing.T) {
	tests := []struct {
		name  string
		parts []string
		want  string
	}{
		{"surrogate pair split", []string{`"hi \ud83d"`, `"\ude00 there"`}, "hi \U0001F600 there"},
		{"upper-case hex", []string{`"\uD83D"`, `"\uDE00"`}, "\U0001F600"},
		{"escaped backslash is not an escape", []string{`"a\\ud83d"`, `"b"`}, `a\ud83db`},
		{"lone high surrogate then text", []string{`"x\ud83d"`, `"y"`}, "x\uFFFDy"},
		{"never completed", []string{`"x\ud83d"`}, "x\uFFFD"},
		{"utf-8 cut between bytes", []string{"\"caf\xc3\"", "\"\xa9!\""}, "café!"},
		{"four-byte utf-8 cut", []string{"\"\xf0\x9f\"", "\"\x98\x80\""}, "\U0001F600"},
		{"null fragment keeps the tail", []string{`"\ud83d"`, `null`, `"\ude00"`}, "\U0001F600"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var j utf16Joiner
			var got string
			for _, p := range tc.parts {
				got += j.decode(json.RawMessage(p))
			}
			got += j.rest()
			if got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}
