package jsonstrict

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// fuzzWire has the kinds of fields the request decoders use: pointers,
// raw messages, slices of structs holding raw messages, nested structs,
// plain values, an untagged field and an option.
type fuzzWire struct {
	Model    *string         `json:"model"`
	Stream   *bool           `json:"stream"`
	Temp     *float64        `json:"temperature"`
	N        *int64          `json:"n,omitempty"`
	Stop     json.RawMessage `json:"stop"`
	Messages []fuzzMessage   `json:"messages"`
	Opts     *struct {
		Usage *bool `json:"include_usage"`
	} `json:"stream_options"`
	Meta    map[string]any `json:"metadata"`
	Upper   upper          `json:"upper"`
	UpperP  *upper         `json:"upper_p"`
	When    *textTime      `json:"when"`
	Custom  []customObject `json:"custom"`
	Any     any            `json:"any"`
	Untaged int
	//lint:ignore U1000 decoding must leave an unexported field alone
	skipped int
	Ignored string `json:"-"`
}

type fuzzMessage struct {
	Role    *string         `json:"role"`
	Content json.RawMessage `json:"content"`
	Calls   []struct {
		ID string `json:"id"`
		Fn struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// upper, textTime and customObject decode themselves: Unmarshal must
// leave them to their methods, as encoding/json does.
type upper string

func (u *upper) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*u = upper(strings.ToUpper(s))
	return nil
}

type textTime struct{ s string }

func (t *textTime) UnmarshalText(b []byte) error { t.s = "text:" + string(b); return nil }

type customObject struct{ Raw string }

func (c *customObject) UnmarshalJSON(b []byte) error { c.Raw = string(b); return nil }

var decodeSeeds = []string{
	`{"upper":"abc","upper_p":"def","when":"noon","custom":[{"a":1},{"b":[2]}]}`, `{"upper":null,"upper_p":null,"when":null,"custom":null}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":[{"type":"text","text":"a"}]},{"role":"assistant","content":null,"tool_calls":[{"id":"c","function":{"name":"f"}}]}]}`,
	`{"MODEL":"m","messages":[]}`, `{"Model":"x"}`, `{"untaged":3}`, `{"Untaged":3}`, `{"ſtream":true}`,
	`{"mod\u0065l":"m","stop":["a","b"],"n":2,"temperature":0.5e1}`,
	`{"messages":null,"stop":null,"stream_options":null}`, `{"messages":[null]}`, `{"messages":[1]}`, `{"messages":{}}`,
	`{"messages":[{"role":1}]}`, `{"model":1}`, `{"n":"2"}`, `{"n":1.5}`, `{"temperature":"hot"}`,
	`{"metadata":{"a":[1,{"b":"\"}"}]},"any":[true,false,null,-0.0e-0]}`, `{"-":1,"skipped":2,"Ignored":"x"}`,
	`{"messages":[{"content":"a\\\"b\\\\","role":"user"}]}`, ` { "messages" : [ { "role" : "user" , "content" : "x" } ] } `,
	`{"messages":[{"role":"user","content":"x","unknown":{"deep":[1,2,3]}}]}`,
}

// TestUnmarshalMatchesEncodingJSON: for each seed, Unmarshal decodes what
// json.Unmarshal decodes, or fails as it fails.
func TestUnmarshalMatchesEncodingJSON(t *testing.T) {
	for _, s := range decodeSeeds {
		sameAsEncodingJSON(t, []byte(s))
	}
}

func sameAsEncodingJSON(t *testing.T, b []byte) {
	t.Helper()
	if Check(b, 16) != nil {
		return
	}
	var got, want fuzzWire
	gerr := Unmarshal(b, 16, &got)
	werr := json.Unmarshal(b, &want)
	if (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != werr.Error()) {
		t.Fatalf("%s: Unmarshal %v, json.Unmarshal %v", b, gerr, werr)
	}
	if !reflect.DeepEqual(got, want) {
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		t.Fatalf("%s: Unmarshal %s, json.Unmarshal %s", b, gj, wj)
	}
	fresh, derr := Decode[fuzzWire](b, 16) // Unmarshal into a new value
	if (derr == nil) != (werr == nil) || (derr != nil && derr.Error() != werr.Error()) || !reflect.DeepEqual(fresh, want) {
		t.Fatalf("%s: Decode %+v %v, json.Unmarshal %+v %v", b, fresh, derr, want, werr)
	}
}

// checkedSameAsEncodingJSON: UnmarshalChecked of each top-level member
// of a checked body decodes what json.Unmarshal decodes, or fails as it
// fails, into the kinds of targets the request decoders use.
func checkedSameAsEncodingJSON(t *testing.T, b []byte) {
	t.Helper()
	s, err := check(b, 16)
	if err != nil {
		return
	}
	for _, m := range s.members {
		for _, newTarget := range []func() any{
			func() any { return new(string) }, func() any { return new([]fuzzMessage) }, func() any { return new(*float64) },
			func() any { return new(json.RawMessage) }, func() any { return new(any) }, func() any { return new(upper) },
		} {
			got, want := newTarget(), newTarget()
			gerr, werr := UnmarshalChecked(m.Value, got), json.Unmarshal(m.Value, want)
			if (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != werr.Error()) || !reflect.DeepEqual(got, want) {
				t.Fatalf("%s into %T: UnmarshalChecked %v %v, json.Unmarshal %v %v", m.Value, got, got, gerr, want, werr)
			}
		}
	}
}

func TestUnmarshalCheckedMatchesEncodingJSON(t *testing.T) {
	for _, s := range decodeSeeds {
		checkedSameAsEncodingJSON(t, []byte(s))
	}
}

func FuzzUnmarshalMatchesEncodingJSON(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sameAsEncodingJSON(t, b)
		checkedSameAsEncodingJSON(t, b)
	})
}

// FuzzCheckGrammar: Check accepts only what encoding/json accepts, and
// refuses valid JSON only for a strict rule, never as invalid.
func FuzzCheckGrammar(f *testing.F) {
	for _, s := range append(decodeSeeds, `{"a":01}`, `{"a":1.}`, `{"a":-}`, `{"a":1e}`, `{"a":"\x"}`, `{"a":[1,]}`, `{"a" 1}`,
		`{"a":1,}`, `{"a":tru}`, `{"a":nul}`, `{"a":[}`, `{"a":{]}`, `{"a":1}}`, `{1:2}`, `{"a":"\u12"}`, `{"a":.5}`, `{"a":+1}`) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := Check(b, 16)
		valid := json.Valid(b)
		if err == nil && !valid {
			t.Fatalf("%q: accepted, but it is not JSON", b)
		}
		if valid && errors.Is(err, ErrInvalidJSON) {
			t.Fatalf("%q: refused as invalid, but it is JSON: %v", b, err)
		}
	})
}

// TestCheckGrammarRefusals: the grammar is Check's own now; each of these
// is refused as invalid JSON.
func TestCheckGrammarRefusals(t *testing.T) {
	for _, s := range []string{`{"a":01}`, `{"a":1.}`, `{"a":-}`, `{"a":1e}`, `{"a":1e+}`, `{"a":"\x"}`, `{"a":[1,]}`, `{"a" 1}`,
		`{"a":1,}`, `{"a":tru}`, `{"a":nul}`, `{"a":falsey}`, `{"a":[}`, `{"a":{]}`, `{1:2}`, `{"a":"\u12"}`, `{"a":.5}`, `{"a":+1}`,
		`{"a":1 2}`, `{"a":[1 2]}`, `{"a":{"b":1 "c":2}}`, `{"a":}`, `{`, `{"a"`, `{"a":`, `{"a":[`, `{"a":"`} {
		if err := Check([]byte(s), 16); !errors.Is(err, ErrInvalidJSON) {
			t.Errorf("%s: %v, want invalid JSON", s, err)
		}
	}
	for _, s := range []string{`{"a":-0.5E+10,"b":[true,false,null,{},[]],"c":"\/\b\f\n\r\t\"\\"}`, "{\r\n\t}"} {
		if err := Check([]byte(s), 16); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
}

// TestUnmarshalLargeMessageReadOnce: a 1 MiB message decodes to the same
// value, with its content as written.
func TestUnmarshalLargeMessageReadOnce(t *testing.T) {
	content := `"` + strings.Repeat(`lorem \"ipsum\" `, 1<<16) + `"`
	b := []byte(`{"model":"m","messages":[{"role":"user","content":` + content + `}]}`)
	sameAsEncodingJSON(t, b)
	var w fuzzWire
	if err := Unmarshal(b, 16, &w); err != nil || string(w.Messages[0].Content) != content {
		t.Fatalf("content of %d bytes decoded to %d: %v", len(content), len(w.Messages[0].Content), err)
	}
}

// TestStringScanEveryByte: the eight-byte scan of strings finds a quote,
// a backslash or a control character at any offset, and only those.
func TestStringScanEveryByte(t *testing.T) {
	for c := range 128 {
		for at := range 17 {
			text := []byte(strings.Repeat("a", 24))
			text[at] = byte(c)
			b := append(append([]byte(`{"k":"`), text...), `"}`...)
			err := Check(b, 16)
			if valid := json.Valid(b); (err == nil) != valid {
				t.Fatalf("byte %#x at %d: Check %v, json.Valid %v", c, at, err, valid)
			}
		}
	}
}

// A Raw member shares the body it was decoded from, capped so an append
// copies; in a slice of structs too; null is kept as written; and where
// Unmarshal hands the body to encoding/json, a Raw is a copy, as a
// json.RawMessage is.
func TestRawSharesTheBody(t *testing.T) {
	type msg struct {
		Content Raw `json:"content"`
	}
	var v struct {
		Content  Raw             `json:"content"`
		Copy     json.RawMessage `json:"copy"`
		Messages []msg           `json:"messages"`
		Null     Raw             `json:"null"`
	}
	body := []byte(`{"content":"long prompt","copy":"x","messages":[{"content":[{"type":"text"}]}],"null":null}`)
	if err := Unmarshal(body, 0, &v); err != nil {
		t.Fatal(err)
	}
	within := func(r []byte) bool {
		return len(r) > 0 && &r[0] == &body[bytes.Index(body, r)] && cap(r) == len(r)
	}
	if string(v.Content) != `"long prompt"` || !within(v.Content) {
		t.Fatalf("content %q not shared", v.Content)
	}
	if string(v.Messages[0].Content) != `[{"type":"text"}]` || !within(v.Messages[0].Content) {
		t.Fatalf("message content %q not shared", v.Messages[0].Content)
	}
	if string(v.Null) != "null" || string(v.Copy) != `"x"` || &v.Copy[0] == &body[bytes.Index(body, []byte(`"x"`))] {
		t.Fatalf("null %q, copy %q (shared: %v)", v.Null, v.Copy, &v.Copy[0] == &body[bytes.Index(body, []byte(`"x"`))])
	}
	// A key matching a field only in another case: encoding/json decodes
	// the body, and the Raw is its own copy.
	var w struct {
		Content Raw `json:"content"`
	}
	folded := []byte(`{"CONTENT":"hi"}`)
	if err := Unmarshal(folded, 0, &w); err != nil || string(w.Content) != `"hi"` || &w.Content[0] == &folded[11] {
		t.Fatalf("fallback: %q, %v", w.Content, err)
	}
}

// TestFieldsOfCachesCustomTypes: a struct that decodes itself is told
// apart once, and its answer (no plain fields) is served from the cache
// after, like a plain struct's.
func TestFieldsOfCachesCustomTypes(t *testing.T) {
	custom, plain := reflect.TypeFor[customObject](), reflect.TypeFor[fuzzWire]()
	if fieldsOf(custom) != nil {
		t.Fatal("a custom struct has plain fields")
	}
	if fs, ok := fieldCache.Load(custom); !ok || fs.(*fields) != nil {
		t.Fatalf("custom struct cached as %v (present %v), want a nil entry", fs, ok)
	}
	fs := fieldsOf(plain)
	if fs == nil || fieldsOf(plain) != fs {
		t.Fatalf("plain struct fields %v not cached", fs)
	}
	if fieldsOf(reflect.TypeFor[*customObject]()) != nil {
		t.Fatal("a pointer has fields")
	}
}
