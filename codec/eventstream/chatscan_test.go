package eventstream

import (
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/valyala/fastjson"
)

// chatScanSeeds are Chat chunks as upstreams write them, and the shapes
// scanChat must leave to the tree.
var chatScanSeeds = []string{
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":"fp","choices":[{"index":0,"delta":{"content":"token 1 "},"logprobs":null,"finish_reason":null}]}`,
	`{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}`,
	`{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"a\nb\t\"c\" \\ \/ \u00e9\u4e2d\u0000"}}]}`,
	`{"choices":[{"index":0,"delta":{"reasoning_content":"think","content":null}},{"index":1,"delta":{"refusal":"no"},"finish_reason":"content_filter"}]}`,
	` { "choices" : [ { "index" : 3 , "text" : "legacy" , "finish_reason" : "length" } ] , "usage" : null } `,
	`{"choices":[{"index":0,"delta":{"content":"x","extra":{"deep":[1,2.5e-3,-0,true,false,null,{"a":"b"}]}}}],"object":5}`,
	`{"choices":null,"error":null}`, `{"choices":[]}`, `{}`, `null`, `[]`, `"x"`, `[DONE]`,
	// Left to the tree:
	`{"choices":[{"index":0,"delta":{}}],"usage":{"prompt_tokens":9,"completion_tokens":32,"total_tokens":41}}`,
	`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{}"}}]}}]}`,
	`{"choices":[{"index":0,"delta":{"function_call":{"name":"f"}}}]}`,
	`{"error":{"message":"boom","type":"server_error"}}`, `{"object":"error","message":"boom"}`, `{"object":"\u0065rror"}`,
	`{"choices":[{"index":0}],"choices":[{"index":1}]}`, `{"choices":[{"index":0,"index":1}]}`,
	`{"choices":[{"index":0,"delta":{"content":"a","content":"bb"}}]}`, `{"\u0063hoices":[{"index":0,"finish_reason":"stop"}]}`,
	`{"choices":[{"index":0,"delta":{"content":"\ud83d\ude00"}}]}`, `{"choices":[{"index":0,"delta":{"content":"\ud800x"}}]}`,
	`{"choices":[{"index":01}]}`, `{"choices":[{"index":-1}]}`, `{"choices":[{"index":1.0}]}`, `{"choices":[{"index":1e0}]}`,
	`{"choices":[{"index":9999999999}]}`, `{"choices":[1]}`, `{"choices":[{"index":0,"delta":"x"}]}`, `{"choices":{}}`,
	`{"choices":[{"index":0,"finish_reason":1}]}`, `{"choices":[{"index":0,"delta":{"content":1}}]}`,
	"{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\x01\"}}]}", `{"a":1}x`, `{"a":1,}`, `{"a":tru}`, `{"a":nullx}`,
	`{"a":` + strings.Repeat(`[`, 40) + strings.Repeat(`]`, 40) + `}`,
}

// TestScanChatReadsCommonChunks: the chunks upstreams stream are read by
// scanChat (so the fast path is taken), with the tree's values.
func TestScanChatReadsCommonChunks(t *testing.T) {
	for _, s := range chatScanSeeds[:7] {
		k, ok := scanChat([]byte(strings.TrimSpace(s)))
		if !ok || k.n == 0 {
			t.Fatalf("%s: not read (%v, %d choices)", s, ok, k.n)
		}
		scanMatchesTree(t, []byte(strings.TrimSpace(s)))
	}
	k, _ := scanChat([]byte(chatScanSeeds[3]))
	if got := k.choices[0].output; got != len("a\nb\t\"c\" \\ / é中\x00") {
		t.Fatalf("decoded length %d", got)
	}
}

// TestScanChatLeavesTheRest: what scanChat does not read exactly as the
// tree does goes to the tree.
func TestScanChatLeavesTheRest(t *testing.T) {
	for _, s := range chatScanSeeds[14:] {
		if _, ok := scanChat([]byte(s)); ok {
			t.Errorf("%s: read by scanChat, which must leave it to the tree", s)
		}
	}
}

// scanMatchesTree: when scanChat reads data, the tree reads the same, and
// an observer with scanChat ends in the state of one without.
func scanMatchesTree(t *testing.T, data []byte) {
	t.Helper()
	if k, ok := scanChat(data); ok {
		var p fastjson.Parser
		v, err := p.ParseBytes(data)
		if err != nil || v.Type() != fastjson.TypeObject {
			t.Fatalf("%q: scanned, but the tree has %v", data, err)
		}
		c := readChatChunk(v)
		if c.error(v) != nil || present(c.usage) {
			t.Fatalf("%q: scanned, but the tree has an error or usage", data)
		}
		var tree []scannedChoice
		for _, ch := range c.choices.GetArray() {
			cc := readChatChoice(ch, false)
			if cc.toolCall {
				t.Fatalf("%q: scanned, but the tree has a tool call", data)
			}
			tree = append(tree, scannedChoice{index: cc.index, finished: cc.finished, output: cc.output})
		}
		if !reflect.DeepEqual(tree, append([]scannedChoice(nil), k.choices[:k.n]...)) {
			t.Fatalf("%q: scanned %+v, the tree %+v", data, k.choices[:k.n], tree)
		}
	}
	fast, tree := NewObserver(DialectChat, FormatSSE), NewObserver(DialectChat, FormatSSE)
	tree.treeOnly = true
	for _, o := range []*Observer{fast, tree} {
		o.Feed([]byte("data: " + strings.ReplaceAll(string(data), "\n", " ") + "\n\n"))
		o.Feed([]byte("data: " + strings.ReplaceAll(string(data), "\n", " ") + "\n\n"))
		o.Close()
		o.r, o.memo = nil, chatMemo{}
	}
	tree.treeOnly = false
	if !reflect.DeepEqual(fast, tree) {
		t.Fatalf("%q: observed %+v with scanChat, %+v without", data, fast, tree)
	}
}

func FuzzScanChatMatchesTree(f *testing.F) {
	for _, s := range chatScanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		scanMatchesTree(t, data)
	})
}

// memoMatchesFresh: a chunk scanned from a memo another chunk left reads
// as it does from its first byte.
func memoMatchesFresh(t *testing.T, first, next []byte) {
	t.Helper()
	var m chatMemo
	m.scan(first, new(chatScan))
	head := string(m.head)
	var got chatScan
	gotOK := m.scan(next, &got)
	want, wantOK := scanChat(next)
	if gotOK != wantOK || gotOK && !slices.Equal(got.choices[:got.n], want.choices[:want.n]) {
		t.Fatalf("after %q (head %q), %q: scanned %v %+v from the memo, %v %+v from the start",
			first, head, next, gotOK, got.choices[:got.n], wantOK, want.choices[:want.n])
	}
}

// TestChatMemo: a stream's chunks after its first are scanned from where
// their choices start, and read as from the start — also where a chunk
// that begins alike differs after the head, in ways the scan must refuse.
func TestChatMemo(t *testing.T) {
	const head = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":`
	first := []byte(head + `[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}`)
	var m chatMemo
	if !m.scan(first, new(chatScan)) || string(m.head) != head {
		t.Fatalf("head %q, want %q", m.head, head)
	}
	for _, tail := range []string{
		`[{"index":0,"delta":{"content":"bb"},"finish_reason":null}]}`,
		` [{"index":0,"delta":{},"finish_reason":"stop"}] }`,
		`[{"index":1,"delta":{"content":"é"}}],"usage":null,"obfuscation":"x1"}`,
		`[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`,
		`[{"index":0}],"choices":[{"index":1}]}`, `[{"index":0}],"error":null,"object":"error"}`,
		`[{"index":0}],"model":"m2"}`, `[{"index":0}],"object":"x"}`, `null}`, `[{"index":0}]`, `[{"index":0}]}x`, `{}}`,
	} {
		memoMatchesFresh(t, first, []byte(head+tail))
	}
	for _, other := range []string{`{"choices":[{"index":0}]}`, `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":2,"model":"m","choices":[]}`} {
		memoMatchesFresh(t, first, []byte(other))
	}
	long := []byte(`{"id":"` + strings.Repeat("i", maxMemoHead) + `","choices":[]}`)
	var lm chatMemo
	if !lm.scan(long, new(chatScan)) || len(lm.head) != 0 {
		t.Fatalf("a head of %d bytes kept", len(lm.head))
	}
}

// TestChatTemplate: a chunk that is the last content chunk with another
// string is read by the template alone, as from the start; a chunk that
// differs anywhere but in that string, or whose string the scan would
// refuse, is not.
func TestChatTemplate(t *testing.T) {
	const before = `{"id":"c","choices":[{"index":0,"delta":{"role":"assistant"}},{"index":1,"delta":{"reasoning":"r","content":`
	const after = `},"logprobs":null,"finish_reason":null}],"usage":null}`
	first := []byte(before + `"abc"` + after)
	var m chatMemo
	var k chatScan
	if ok := m.scan(first, &k); !ok || k.n != 2 || k.choices[1].output != 4 {
		t.Fatalf("first: %v %+v", ok, k.choices[:k.n])
	}
	if m.tmpl.at != len(before) || string(m.tmpl.b) != before+after || m.tmpl.choices[1].output != 1 {
		t.Fatalf("template at %d, %q, %+v", m.tmpl.at, m.tmpl.b, m.tmpl.choices[:m.tmpl.n])
	}
	for _, str := range []string{`""`, `"x"`, `"\u00e9\n\"é"`, `"` + strings.Repeat("y", 300) + `"`} {
		next := []byte(before + str + after)
		var k chatScan
		if ok := m.tmpl.match(next, &k); !ok || k.n != 2 || k.choices[1].output != 1+len(decodeString(t, str)) {
			t.Fatalf("%s: matched %v, %+v", str, ok, k.choices[:k.n])
		}
		memoMatchesFresh(t, first, next)
	}
	for _, next := range []string{
		before + `null` + after, before + `"a` + "\x01" + `"` + after, before + `"\ud800"` + after,
		before + `"a"` + after + ` `, before + `"a"` + strings.Replace(after, "null", "\"stop\"", 1),
		strings.Replace(before, `"r"`, `"rr"`, 1) + `"a"` + after, before + `"a",` + after, before + `"a"`,
	} {
		if m.tmpl.match([]byte(next), new(chatScan)) {
			t.Fatalf("%s: matched the template", next)
		}
		memoMatchesFresh(t, first, []byte(next))
	}
	var none chatMemo
	none.scan([]byte(`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`), new(chatScan))
	if none.tmpl.at != 0 {
		t.Fatalf("a chunk without text kept as the template at %d", none.tmpl.at)
	}
}

func decodeString(t *testing.T, s string) string {
	t.Helper()
	var v string
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func FuzzChatMemoMatchesFresh(f *testing.F) {
	for i, s := range chatScanSeeds {
		f.Add([]byte(chatScanSeeds[0]), []byte(s))
		f.Add([]byte(s), []byte(chatScanSeeds[(i+1)%len(chatScanSeeds)]))
	}
	f.Fuzz(func(t *testing.T, first, next []byte) {
		memoMatchesFresh(t, first, next)
		var m chatMemo
		if m.scan(first, new(chatScan)); len(m.head) > 0 {
			// next after first's head: the scan resumes on any tail.
			memoMatchesFresh(t, first, append(append([]byte(nil), m.head...), next...))
		}
		if at := m.tmpl.at; at > 0 {
			// next as first's string: the template reads it, or the
			// scan from the start refuses it too.
			for _, str := range [][]byte{next, append(append([]byte(`"`), next...), '"')} {
				around := append(append(append([]byte(nil), m.tmpl.b[:at]...), str...), m.tmpl.b[at:]...)
				memoMatchesFresh(t, first, around)
			}
		}
	})
}

// BenchmarkScanChatStream: a stream's chunks through one memo, as the
// observer reads them.
func BenchmarkScanChatStream(b *testing.B) {
	chunks := make([][]byte, 32)
	for i := range chunks {
		chunks[i] = []byte(`{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":"bench-t","choices":[{"index":0,"delta":{"content":"xxxxxxxxxxxxxxx` + strconv.Itoa(i%10) + `"},"logprobs":null,"finish_reason":null}],"usage":null}`)
	}
	b.ReportAllocs()
	for b.Loop() {
		var m chatMemo
		var k chatScan
		for _, c := range chunks {
			if ok := m.scan(c, &k); !ok || k.n != 1 {
				b.Fatalf("%s: not read", c)
			}
		}
	}
}

// BenchmarkScanChat: the fast path over the chunks upstreams stream most
// (a content delta, the finish) — the observer's cost per event.
func BenchmarkScanChat(b *testing.B) {
	chunks := [][]byte{[]byte(chatScanSeeds[0]), []byte(chatScanSeeds[1]),
		[]byte(`{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":"bench-t","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}`)}
	b.ReportAllocs()
	for b.Loop() {
		for _, c := range chunks {
			if k, ok := scanChat(c); !ok || k.n != 1 {
				b.Fatalf("%s: not read", c)
			}
		}
	}
}
