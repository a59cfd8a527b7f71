package jsonstrict

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestCheck(t *testing.T) {
	deep := strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001)
	at64 := strings.Repeat(`{"a":`, 63) + `{}` + strings.Repeat("}", 63)
	at65 := strings.Repeat(`{"a":`, 64) + `{}` + strings.Repeat("}", 64)
	tests := []struct {
		name string
		body string
		want error
	}{
		{"ok", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, nil},
		{"ok with escapes", `{"a":"\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"}`, nil},
		{"valid weird text", `{"a":"\u202e RTL 👩‍👩‍👧 z̴̡̛a̶l̷g̸o\u0000"}`, nil},
		{"empty", ``, ErrEmptyBody},
		{"array", `[1,2]`, ErrNotAnObject},
		{"scalar", `"x"`, ErrNotAnObject},
		{"two values", `{} {}`, ErrInvalidJSON},
		{"trailing garbage", `{"a":1}x`, ErrNotAnObject},
		{"malformed", `{"a":}`, ErrInvalidJSON},
		{"unterminated", `{"a":"x`, ErrInvalidJSON},
		{"invalid utf8", "{\"a\":\"\xff\"}", ErrInvalidUTF8},
		{"lone high surrogate", `{"a":"\ud800"}`, ErrLoneSurrogate},
		{"lone low surrogate", `{"a":"\udc00"}`, ErrLoneSurrogate},
		{"high then non-surrogate", `{"a":"\ud800\u0041"}`, ErrLoneSurrogate},
		{"high at end", `{"a":"x\ud83d"}`, ErrLoneSurrogate},
		{"duplicate key", `{"model":"a","model":"b"}`, ErrDuplicateKey},
		{"duplicate escaped key", `{"model":"a","mod\u0065l":"b"}`, ErrDuplicateKey},
		{"duplicate nested key", `{"a":{"stream":true,"stream":false}}`, ErrDuplicateKey},
		{"same key in siblings", `{"a":[{"k":1},{"k":2}]}`, nil},
		{"keys differing in case", `{"model":"a","MODEL":"b"}`, ErrDuplicateKey},
		{"keys differing in case, upper first", `{"Max_Tokens":10,"max_tokens":100000}`, ErrDuplicateKey},
		{"keys folding by unicode", `{"stream":false,"ſtream":true}`, ErrDuplicateKey},
		{"kelvin sign folds to k", `{"top_k":1,"top_K":2}`, ErrDuplicateKey},
		{"one key in another case", `{"MODEL":"b"}`, nil},
		{"nested keys differing in case", `{"metadata":{"ID":"1","id":"2"}}`, nil},
		{"17th key duplicates the 3rd", manyKeys(17, 2), ErrDuplicateKey},
		{"40th key duplicates the 1st", manyKeys(40, 0), ErrDuplicateKey},
		{"40th key duplicates the 39th", manyKeys(40, 38), ErrDuplicateKey},
		{"40 distinct keys", manyKeys(40, -1), nil},
		{"40 distinct nested keys, twice", `{"a":` + manyKeys(40, -1) + `,"b":` + manyKeys(40, -1) + `}`, nil},
		{"a duplicate after a closed object", `{"a":{"x":1,"y":2},"b":1,"a":2}`, ErrDuplicateKey},
		{"an inner key equal to an outer one", `{"a":{"a":{"a":1}},"b":[{"a":1,"b":2}]}`, nil},
		{"key equal to value", `{"a":"a","b":"a"}`, nil},
		{"depth 64 ok", at64, nil},
		{"depth 65 refused", at65, ErrTooDeep},
		{"depth 10001 refused", deep, ErrTooDeep},
		{"control char", "{\"a\":\"\x01\"}", ErrInvalidJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check([]byte(tt.body), 64)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Check = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Check = %v, want %v", err, tt.want)
			}
		})
	}
}

// manyKeys is an object of n members k0…k(n-1), the last named as
// member dup when dup >= 0.
func manyKeys(n, dup int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		k := i
		if i == n-1 && dup >= 0 {
			k = dup
		}
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"k%d":%d`, k, i)
	}
	b.WriteString("}")
	return b.String()
}

// TestCheckManyKeysIsLinear: objects with 200,000 keys — nested, at the
// top level, and at the top level in upper case (which the case-fold
// rule folds) — are checked in linear time.
func TestCheckManyKeysIsLinear(t *testing.T) {
	for _, form := range []string{`"a":{%s}`, `%s`, `upper %s`} {
		var b strings.Builder
		for i := range 200000 {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"k%d":1`, i)
		}
		members := b.String()
		if strings.HasPrefix(form, "upper ") {
			form, members = strings.TrimPrefix(form, "upper "), strings.ToUpper(members)
		}
		body := "{" + fmt.Sprintf(form, members) + "}"
		start := time.Now()
		if err := Check([]byte(body), 64); err != nil {
			t.Fatal(err)
		}
		// Linear is ~0.3 s a form here (~1.8 s under the race detector, more on a
		// loaded machine); quadratic in 200,000 keys would be minutes.
		if d := time.Since(start); d > 15*time.Second {
			t.Fatalf("Check of %s took %v", form, d)
		}
	}
}

// FuzzFoldKey: two keys fold to one form exactly when strings.EqualFold
// (encoding/json's key matching) takes them for one another.
func FuzzFoldKey(f *testing.F) {
	for _, p := range [][2]string{{"model", "MODEL"}, {"stream", "\u017ftream"}, {"top_k", "TOP_\u212a"}, {"a", "b"}, {"ǅ", "ǆ"}, {"ß", "ss"}, {"Σ", "ς"}} {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if !utf8.ValidString(a) || !utf8.ValidString(b) {
			return
		}
		if got, want := foldKey(a) == foldKey(b), strings.EqualFold(a, b); got != want {
			t.Fatalf("%q %q: folded equal %v, EqualFold %v", a, b, got, want)
		}
	})
}

func TestCheckLargeBodyIsLinear(t *testing.T) {
	body := `{"a":"` + strings.Repeat("z\u0301\u0302", 350000) + `"}`
	start := time.Now()
	if err := Check([]byte(body), 64); err != nil {
		t.Fatal(err)
	}
	// Generous bound for -race on a shared 2-core machine; the point is
	// "no super-linear work" (a 1 MiB body takes about 5 ms without -race).
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Check of %d bytes took %v", len(body), d)
	}
}

func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":"\ud800"}`, `{"a":{"a":1,"a":2}}`, `[]`, `{"\u0061":1,"a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := Check(b, 16)
		if err == nil && !strings.HasPrefix(strings.TrimLeft(string(b), " \t\r\n"), "{") {
			t.Fatalf("accepted a non-object: %q", b)
		}
		// Unmarshal's one grammar pass gives Check's verdict.
		var v map[string]any
		if uerr := Unmarshal(b, 16, &v); (uerr == nil) != (err == nil) || (err != nil && uerr.Error() != err.Error()) {
			t.Fatalf("%q: Check %v, Unmarshal %v", b, err, uerr)
		}
	})
}

func TestMarshalKeepsHTML(t *testing.T) {
	b, err := Marshal(map[string]string{"a": "<b>&</b>"})
	if err != nil || string(b) != `{"a":"<b>&</b>"}` {
		t.Fatalf("%s %v", b, err)
	}
	if _, err := Marshal(func() {}); err == nil {
		t.Fatal("an unencodable value was accepted")
	}
}

// TestAppendStringMatchesMarshal: the append encoder writes every string
// exactly as Marshal does, control characters, quotes, invalid UTF-8 and
// the JavaScript line separators included.
func TestAppendStringMatchesMarshal(t *testing.T) {
	cases := []string{"", "plain", "quote \" backslash \\ slash /", "\x00\x01\b\f\n\r\t\x1f\x7f", "<html> & more",
		"héllo wörld ✓ 🙂", "\xff\xfe bad \xc3", "line\u2028sep\u2029", "\xed\xa0\xbd", string([]byte{0xed, 0xa0, 0x80})}
	for _, s := range cases {
		want, err := Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString(nil, s); string(got) != string(want) {
			t.Errorf("AppendString(%q) = %s, want %s", s, got, want)
		}
	}
}

// FuzzAppendString holds the same for any string.
func FuzzAppendString(f *testing.F) {
	f.Add("a\"b\\c\x00\u2028\xff")
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := Marshal(s)
		if got := AppendString(nil, s); string(got) != string(want) {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
		}
	})
}

// TestUnmarshalRefusesAsCheck: every refusal of Check is Unmarshal's too,
// with the same error (IsCheckError), and a body that fits is decoded; a
// body that does not fit the value is encoding/json's error, not a
// refusal.
func TestUnmarshalRefusesAsCheck(t *testing.T) {
	for _, b := range []string{``, `{"a":1}`, `{"a":1,}`, `{"a":01}`, `{"a":"\ud800"}`, `{"a":1,"a":2}`, `[1]`, `{"a":1} x`,
		`{"a":tru}`, "{\"a\":\"\xff\"}", `{"a":[` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `]}`, `{"a":{"b":null}}`} {
		cerr := Check([]byte(b), 16)
		var v map[string]any
		uerr := Unmarshal([]byte(b), 16, &v)
		if (cerr == nil) != (uerr == nil) || (cerr != nil && (uerr.Error() != cerr.Error() || !IsCheckError(uerr))) {
			t.Errorf("%q: Check %v, Unmarshal %v", b, cerr, uerr)
		}
		if cerr == nil && v == nil {
			t.Errorf("%q: nothing decoded", b)
		}
	}
	var n struct{ A int }
	if err := Unmarshal([]byte(`{"A":"x"}`), 16, &n); err == nil || IsCheckError(err) {
		t.Fatalf("a type mismatch: %v", err)
	}
}
