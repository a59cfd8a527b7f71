package openai

import (
	"encoding/json"
	"unicode/utf8"
)

// utf16Joiner decodes the successive JSON string fragments of one text
// (a stream's content deltas) without breaking a character that an
// upstream split across two events: a UTF-16 surrogate pair written as
// two \u escapes ("…\ud83d" then "\ude00…", as servers that cut text by
// UTF-16 units do) or a UTF-8 sequence cut between its bytes. The
// unfinished tail of one fragment is held and joined with the next, where
// decoding each fragment alone would make two U+FFFD.
type utf16Joiner struct {
	escape string // a trailing high-surrogate escape, e.g. `\ud83d`
	bytes  string // a trailing incomplete UTF-8 sequence
}

// decode returns the text of the JSON string raw (empty for null or
// anything not a string), minus a held tail.
func (j *utf16Joiner) decode(raw json.RawMessage) string {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return ""
	}
	inner := string(raw[1 : len(raw)-1])
	switch {
	case j.escape != "" && hasLowEscape(inner):
		inner = j.escape + inner
	case j.escape != "":
		inner = `\ufffd` + inner
	}
	inner = j.bytes + inner
	j.escape, j.bytes = "", ""
	if n := len(inner); n >= 6 && isHighEscape(inner[n-6:]) && escapes(inner, n-6) {
		j.escape, inner = inner[n-6:], inner[:n-6]
	} else if k := incompleteTail(inner); k > 0 {
		j.bytes, inner = inner[len(inner)-k:], inner[:len(inner)-k]
	}
	var out string
	if json.Unmarshal([]byte(`"`+inner+`"`), &out) != nil {
		return ""
	}
	return out
}

// rest is what is still held at the end of the text: an unpaired high
// surrogate or a cut UTF-8 sequence, as the U+FFFD a decoder makes of it.
func (j *utf16Joiner) rest() string {
	if j.escape == "" && j.bytes == "" {
		return ""
	}
	j.escape, j.bytes = "", ""
	return "\uFFFD"
}

// isHighEscape reports whether e is a \u escape of a high surrogate.
func isHighEscape(e string) bool {
	if len(e) != 6 || e[0] != '\\' || e[1] != 'u' {
		return false
	}
	return (e[2] == 'd' || e[2] == 'D') && (e[3] >= '8' && e[3] <= '9' || e[3] >= 'a' && e[3] <= 'b' || e[3] >= 'A' && e[3] <= 'B') && isHex(e[4]) && isHex(e[5])
}

// hasLowEscape reports whether s starts with a \u escape of a low
// surrogate.
func hasLowEscape(s string) bool {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return false
	}
	return (s[2] == 'd' || s[2] == 'D') && (s[3] >= 'c' && s[3] <= 'f' || s[3] >= 'C' && s[3] <= 'F') && isHex(s[4]) && isHex(s[5])
}

// escapes reports whether the backslash at s[i] starts an escape (it is
// not itself escaped by an odd run of backslashes before it).
func escapes(s string, i int) bool {
	n := 0
	for k := i - 1; k >= 0 && s[k] == '\\'; k-- {
		n++
	}
	return n%2 == 0
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// incompleteTail is the length of a UTF-8 sequence cut short at the end
// of s, or 0.
func incompleteTail(s string) int {
	for k := 1; k <= 3 && k <= len(s); k++ {
		c := s[len(s)-k]
		if c < 0x80 {
			return 0
		}
		if utf8.RuneStart(c) {
			if utf8.FullRuneInString(s[len(s)-k:]) {
				return 0
			}
			return k
		}
	}
	return 0
}
