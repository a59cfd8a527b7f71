package eventstream

import (
	"reflect"
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
		o.r = nil
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
