package eventstream

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	sse "github.com/tmaxmax/go-sse"
)

type got struct {
	Name, Data, ID string
	Oversize       bool
}

// readAll feeds in in pieces of size n (all at once when n <= 0).
func readAll(f Format, in string, n int) []got {
	var out []got
	fn := func(ev Event) { out = append(out, got{ev.Name, string(ev.Data), ev.ID, ev.Oversize}) }
	r := NewReader(f, 64)
	b := []byte(in)
	for n > 0 && len(b) > n {
		r.Feed(b[:n], fn)
		b = b[n:]
	}
	r.Feed(b, fn)
	r.Close(fn)
	return out
}

func TestSSEFraming(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []got
	}{
		{"space after colon", "data: {\"a\":1}\n\n", []got{{Data: `{"a":1}`}}},
		{"no space", "data:{\"a\": 1}\n\ndata:[DONE]\n\n", []got{{Data: `{"a": 1}`}, {Data: "[DONE]"}}},
		{"two spaces keep one", "data:  x\n\n", []got{{Data: " x"}}},
		{"CRLF", "event: e\r\ndata: a\r\n\r\n", []got{{Name: "e", Data: "a"}}},
		{"CR only", "data: a\rdata: b\r\r", []got{{Data: "a\nb"}}},
		{"mixed ends", "data: a\rdata: b\r\ndata: c\n\rdata: d\r\rdata: e\n\n", []got{{Data: "a\nb\nc"}, {Data: "d"}, {Data: "e"}}},
		{"CRs before a far LF", "data: a\r\rdata: b\r\r: " + strings.Repeat("z", 50) + "\ndata: c\n\n", []got{{Data: "a"}, {Data: "b"}, {Data: "c"}}},
		{"comments ignored", ": ping\n\n: keep-alive\ndata: x\n\n", []got{{Data: "x"}}},
		{"multi-line data", "data: one\ndata: two\n\n", []got{{Data: "one\ntwo"}}},
		{"event and id", "id: 7\nevent: response.created\ndata: {}\n\n", []got{{Name: "response.created", Data: "{}", ID: "7"}}},
		{"id persists", "id: 7\ndata: a\n\ndata: b\n\n", []got{{Data: "a", ID: "7"}, {Data: "b", ID: "7"}}},
		{"event without data not dispatched", "event: x\n\ndata: y\n\n", []got{{Data: "y"}}},
		{"empty data dispatched", "data:\n\n", []got{{Data: ""}}},
		{"field without colon", "data\n\n", []got{{Data: ""}}},
		{"unknown fields ignored", "retry: 10\nfoo: bar\ndata: z\n\n", []got{{Data: "z"}}},
		{"BOM", "\xEF\xBB\xBFdata: a\n\n", []got{{Data: "a"}}},
		{"unterminated last event dispatched", "data: a\n\ndata: [DONE]", []got{{Data: "a"}, {Data: "[DONE]"}}},
		{"no final blank line", "data: a\n", []got{{Data: "a"}}},
		{"oversize", "data: " + strings.Repeat("x", 200) + "\n\ndata: ok\n\n", []got{{Oversize: true}, {Data: "ok"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, n := range []int{0, 1, 2, 3, 7} {
				if diff := cmp.Diff(tc.want, readAll(FormatSSE, tc.in, n)); diff != "" {
					t.Errorf("pieces of %d (-want +got):\n%s", n, diff)
				}
			}
		})
	}
}

func TestNDJSONFraming(t *testing.T) {
	in := "{\"a\": 1}\r\n\n{\"b\":2}\n{\"c\":3}"
	want := []got{{Data: `{"a": 1}`}, {Data: `{"b":2}`}, {Data: `{"c":3}`}}
	for _, n := range []int{0, 1, 4} {
		if diff := cmp.Diff(want, readAll(FormatNDJSON, in, n)); diff != "" {
			t.Errorf("pieces of %d (-want +got):\n%s", n, diff)
		}
	}
}

// FuzzSSEReader checks the incremental reader against go-sse's reader
// (the reference parse) for any input split at any point. go-sse drops an
// unterminated final event; iop's reader delivers it, so the input is
// terminated with a blank line before comparing. go-sse also dispatches
// events without data (the spec does not), so events with empty data are
// left out on both sides.
func FuzzSSEReader(f *testing.F) {
	for _, s := range []string{"data: a\n\n", "data:a\r\n\r\n", "event: x\ndata: 1\ndata: 2\n\n", ": c\n\ndata: [DONE]\n\n", "id: 1\rdata: z\r\r", "data: \xEF\xBB\xBF\n\n"} {
		f.Add(s, uint8(3))
	}
	f.Fuzz(func(t *testing.T, in string, split uint8) {
		in += "\n\n"
		var want []got
		for ev, err := range sse.Read(strings.NewReader(in), &sse.ReadConfig{MaxEventSize: 1 << 20}) {
			if err != nil {
				return
			}
			if ev.Data != "" {
				want = append(want, got{Name: ev.Type, Data: ev.Data, ID: ev.LastEventID})
			}
		}
		var out []got
		r := NewReader(FormatSSE, 1<<20)
		fn := func(ev Event) {
			if len(ev.Data) > 0 {
				out = append(out, got{ev.Name, string(ev.Data), ev.ID, false})
			}
		}
		b := []byte(in)
		n := int(split%16) + 1
		for len(b) > n {
			r.Feed(b[:n], fn)
			b = b[n:]
		}
		r.Feed(b, fn)
		r.Close(fn)
		if diff := cmp.Diff(want, out); diff != "" {
			t.Fatalf("input %q split %d (-go-sse +iop):\n%s", in, n, diff)
		}
	})
}

func TestScanStops(t *testing.T) {
	var n int
	err := Scan(bytes.NewReader([]byte("data: 1\n\ndata: 2\n\ndata: 3\n\n")), FormatSSE, 0, func(ev Event) bool {
		n++
		return string(ev.Data) != "2"
	})
	if err != nil || n != 2 {
		t.Fatalf("Scan = %v after %d events, want nil after 2", err, n)
	}
}

// BenchmarkTrickledEvent feeds one 2 MiB event in 256-byte reads, as a
// slow upstream trickles a large tool-call argument: the reader's work is
// linear in the bytes (a scanner that re-splits its buffer on every read
// took 11 s for this).
func BenchmarkTrickledEvent(b *testing.B) {
	event := []byte("data: \"" + strings.Repeat("x", 2<<20) + "\"\n\n")
	b.SetBytes(int64(len(event)))
	for b.Loop() {
		r := NewReader(FormatSSE, 0)
		n := 0
		for p := event; len(p) > 0; {
			k := min(256, len(p))
			r.Feed(p[:k], func(Event) { n++ })
			p = p[k:]
		}
		if n != 1 {
			b.Fatalf("%d events", n)
		}
	}
}

// BenchmarkObserveChat observes a typical Chat stream (the edge does this
// for every tunnelled chunk): 32 content chunks, a finish chunk, a usage
// chunk and [DONE], delivered one event per read.
// BenchmarkObserveChat: a 32-token Chat stream through an observer, its
// chunks under one id as upstreams write them, and under an id each
// (where no chunk begins as the last did).
func BenchmarkObserveChat(b *testing.B) {
	for _, ids := range []string{"one", "each"} {
		b.Run("ids="+ids, func(b *testing.B) {
			var events [][]byte
			for i := range 32 {
				id := "chatcmpl-1"
				if ids == "each" {
					id = fmt.Sprintf("chatcmpl-%d", i)
				}
				events = append(events, []byte(fmt.Sprintf(`data: {"id":%q,"object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":"fp","choices":[{"index":0,"delta":{"content":"token %d "},"logprobs":null,"finish_reason":null}]}`+"\n\n", id, i)))
			}
			events = append(events, []byte(`data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}`+"\n\n"),
				[]byte(`data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":32,"total_tokens":41,"prompt_tokens_details":{"cached_tokens":0}}}`+"\n\n"),
				[]byte("data: [DONE]\n\n"))
			b.ReportAllocs()
			for b.Loop() {
				o := NewObserver(DialectChat, FormatSSE)
				for _, ev := range events {
					o.Feed(ev)
				}
				o.Close()
				if !o.Done || o.Usage == nil || o.Usage.TotalTokens != 41 || o.Malformed != 0 || o.Output.Bytes != 32*8+22 {
					b.Fatalf("observed %+v", o)
				}
			}
		})
	}
}

// FuzzObserver: whatever an upstream sends, in any dialect and split
// anywhere, observing it never panics and counts sanely.
func FuzzObserver(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"finish_reason\":\"stop\",\"delta\":{\"tool_calls\":[]}}],\"usage\":{\"total_tokens\":3}}\n\ndata: [DONE]\n\n"), uint8(3))
	f.Add([]byte("event: error\ndata: {\"type\":\"error\",\"error\":{\"code\":429}}\n\n"), uint8(5))
	f.Add([]byte("{\"done\":true,\"message\":{\"tool_calls\":[{}]},\"eval_count\":2}\n"), uint8(1))
	f.Add([]byte("data: {\"choices\":null,\"error\":null,\"object\":\"error\",\"code\":1.5}\n\n"), uint8(7))
	f.Fuzz(func(t *testing.T, data []byte, split uint8) {
		for _, d := range []Dialect{DialectChat, DialectResponses, DialectOllama} {
			for _, format := range []Format{FormatSSE, FormatNDJSON} {
				o := NewObserver(d, format)
				k := max(int(split), 1)
				for p := data; len(p) > 0; p = p[min(k, len(p)):] {
					o.Feed(p[:min(k, len(p))])
				}
				o.Close()
				if o.Malformed > o.Events || (o.FirstIsError && o.Err == nil) {
					t.Fatalf("observed %+v", o)
				}
			}
		}
	})
}

// TestReadBufGrows: a pump's buffer starts small and moves up a size
// only after a read filled it, up to the largest.
func TestReadBufGrows(t *testing.T) {
	b := NewReadBuf()
	defer func() { b.Release() }()
	if len(b.Bytes()) != readSizes[0] {
		t.Fatalf("starts at %d bytes", len(b.Bytes()))
	}
	b.Grow(100)
	if len(b.Bytes()) != readSizes[0] {
		t.Fatalf("a short read grew it to %d", len(b.Bytes()))
	}
	for _, next := range readSizes[1:] {
		b.Grow(len(b.Bytes()))
		if len(b.Bytes()) != next {
			t.Fatalf("a full read moved it to %d, want %d", len(b.Bytes()), next)
		}
	}
	b.Grow(len(b.Bytes()))
	if last := readSizes[len(readSizes)-1]; len(b.Bytes()) != last {
		t.Fatalf("the largest buffer changed to %d", len(b.Bytes()))
	}
	b.Release()
	b = NewReadBuf()
	if len(b.Bytes()) != readSizes[0] {
		t.Fatalf("a new buffer after a large one starts at %d", len(b.Bytes()))
	}
}

// TestReaderOwnsWhatAFeedLeavesOpen: an event Feed leaves unfinished is
// the reader's own copy, whatever becomes of the bytes it was fed (a
// pump reuses its buffer for the next read).
func TestReaderOwnsWhatAFeedLeavesOpen(t *testing.T) {
	var out []string
	fn := func(ev Event) { out = append(out, string(ev.Data)) }
	r := NewReader(FormatSSE, 0)
	buf := []byte("data: first\n\ndata: open\nevent: e\n")
	r.Feed(buf, fn)
	copy(buf, bytes.Repeat([]byte{'#'}, len(buf))) // the pump's next read
	r.Feed([]byte("data: more\n\n"), fn)
	if diff := cmp.Diff([]string{"first", "open\nmore"}, out); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	buf = []byte("data: alone\n")
	r.Feed(buf, fn)
	copy(buf, bytes.Repeat([]byte{'#'}, len(buf)))
	r.Feed([]byte("\n"), fn)
	if out[len(out)-1] != "alone" {
		t.Fatalf("an event finished by the next Feed read %q", out[len(out)-1])
	}
}

// TestReaderReadsWholeEventsInPlace: a stream's events that arrive whole
// cost the reader no buffer of its own (a held stream's reader keeps
// none).
func TestReaderReadsWholeEventsInPlace(t *testing.T) {
	in := []byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n")
	n := 0
	fn := func(ev Event) { n += len(ev.Data) }
	allocs := testing.AllocsPerRun(100, func() {
		r := NewReader(FormatSSE, 0)
		r.Feed(in, fn)
	})
	if n == 0 {
		t.Fatal("no event read")
	}
	if allocs > 1 {
		t.Fatalf("%.0f allocations for a reader fed one whole event, want the reader's own only", allocs)
	}
}
