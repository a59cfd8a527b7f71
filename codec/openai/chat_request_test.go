package openai

import (
	"strings"
	"testing"
)

// megabyte is a 1 MiB message text.
var megabyte = strings.Repeat("lorem ipsum ", 1<<20/12)

// BenchmarkDecodeChatRequest: a small request as SDKs send it, and one
// with a 1 MiB message.
func BenchmarkDecodeChatRequest(b *testing.B) {
	benchDecode(b, func(body []byte) *Error { _, e := DecodeChatRequest(body, Limits{}); return e }, map[string]string{
		"small": `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hi in three words."}],"temperature":0.2,"max_tokens":64,"stream":true,"stream_options":{"include_usage":true}}`,
		"1mib":  `{"model":"m","messages":[{"role":"user","content":"` + megabyte + `"}]}`,
	})
}

// BenchmarkDecodeResponsesRequest: a Responses request whose input is a
// 1 MiB string, and one whose input is a 1 MiB message item.
func BenchmarkDecodeResponsesRequest(b *testing.B) {
	benchDecode(b, func(body []byte) *Error { _, e := DecodeResponsesRequest(body, Limits{}); return e }, map[string]string{
		"1mib-string": `{"model":"m","input":"` + megabyte + `"}`,
		"1mib-item":   `{"model":"m","input":[{"type":"message","role":"user","content":"` + megabyte + `"}]}`,
	})
}

// benchDecode runs decode over each named body, which must decode.
func benchDecode(b *testing.B, decode func([]byte) *Error, bodies map[string]string) {
	for name, s := range bodies {
		b.Run(name, func(b *testing.B) {
			body := []byte(s)
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if e := decode(body); e != nil {
					b.Fatal(e)
				}
			}
		})
	}
}
