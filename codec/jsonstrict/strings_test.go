package jsonstrict

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// strs lists what a walk calls fn with, as "key=text".
type strs []string

func (s *strs) add(key, text []byte) { *s = append(*s, string(key)+"="+string(text)) }

func TestStringsChecked(t *testing.T) {
	deep := strings.Repeat(`{"k":[`, 40) + `"in"` + strings.Repeat(`]}`, 40) // 80 levels: past the key stack's first 16
	for _, c := range []struct {
		body    string
		want    strs
		objects int
	}{
		{`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, strs{"model=m", "role=user", "content=hi"}, 2},
		{`{"a":"x\"y","b":["p",{"c":"q"},"r"],"n":[1,true,null]}`, strs{`a=x"y`, "b=p", "c=q", "b=r"}, 2},
		{`{"top":` + deep + `,"after":"z"}`, strs{"k=in", "after=z"}, 41},
	} {
		if err := Check([]byte(c.body), 1000); err != nil {
			t.Fatalf("%s: not a checked body: %v", c.body, err)
		}
		var got strs
		if n := StringsChecked([]byte(c.body), got.add); n != c.objects || !slices.Equal(got, c.want) {
			t.Errorf("%.60s: %d objects %q, want %d %q", c.body, n, got, c.objects, c.want)
		}
	}
}

// FuzzStringsChecked: of a body Check accepts, StringsChecked calls what
// Strings does; of any other, it returns.
func FuzzStringsChecked(f *testing.F) {
	for _, s := range []string{`{"a":"b"}`, `{"a":["b",{"c":"d\u00e9"}]}`, `{"a":"`, `"`, `}}]]`, `{"a" x}`, `[1,"two"]`, `{"a":"b\"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var got strs
		n := StringsChecked(b, got.add)
		if Check(b, 1000) != nil {
			return
		}
		var want strs
		m, err := Strings(b, 1000, want.add)
		if err != nil || n != m || !slices.Equal(got, want) {
			t.Fatalf("%q: %d %q, Strings %d %q (%v)", b, n, got, m, want, err)
		}
	})
}

func ExampleStringsChecked() {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if Check(body, 0) == nil {
		n := StringsChecked(body, func(key, text []byte) { fmt.Printf("%s: %s\n", key, text) })
		fmt.Println(n, "objects")
	}
	// Output:
	// model: m
	// role: user
	// content: hi
	// 2 objects
}
