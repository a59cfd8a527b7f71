package openai

import (
	"strings"
	"testing"
)

// BenchmarkDecodeChatRequest: a small request as SDKs send it, and one
// with a 1 MiB message.
func BenchmarkDecodeChatRequest(b *testing.B) {
	for _, tc := range []struct{ name, body string }{
		{"small", `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hi in three words."}],"temperature":0.2,"max_tokens":64,"stream":true,"stream_options":{"include_usage":true}}`},
		{"1mib", `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("lorem ipsum ", 1<<20/12) + `"}]}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			body := []byte(tc.body)
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, e := DecodeChatRequest(body, Limits{}); e != nil {
					b.Fatal(e)
				}
			}
		})
	}
}

// BenchmarkDecodeResponsesRequest: a Responses request whose input is a
// 1 MiB string, and one whose input is a 1 MiB message item.
func BenchmarkDecodeResponsesRequest(b *testing.B) {
	text := strings.Repeat("lorem ipsum ", 1<<20/12)
	for _, tc := range []struct{ name, body string }{
		{"1mib-string", `{"model":"m","input":"` + text + `"}`},
		{"1mib-item", `{"model":"m","input":[{"type":"message","role":"user","content":"` + text + `"}]}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			body := []byte(tc.body)
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, e := DecodeResponsesRequest(body, Limits{}); e != nil {
					b.Fatal(e)
				}
			}
		})
	}
}
