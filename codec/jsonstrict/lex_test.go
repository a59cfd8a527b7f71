package jsonstrict

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"
)

// plainRef is PlainBytes byte by byte.
func plainRef(b []byte, i int) int {
	for i < len(b) && b[i] != '"' && b[i] != '\\' && b[i] >= 0x20 {
		i++
	}
	return i
}

// TestPlainBytes compares PlainBytes with the byte loop on runs of every
// length up to a few windows, with the byte that stops it (a quote, a
// backslash, each control character, none) at every place, and bytes of
// multi-byte characters around it.
func TestPlainBytes(t *testing.T) {
	stops := []byte{'"', '\\', 0x00, 0x01, 0x09, 0x0a, 0x1f}
	for _, fill := range []string{"lorem ipsum ", "é中€😀 x", "\x7f\x20~"} {
		run := []byte(strings.Repeat(fill, 3*runWindow/len(fill)+2))
		for n := 0; n < len(run); n += 1 + n/16 {
			for _, stop := range append(stops, 0) {
				b := append(append([]byte(nil), run[:n]...), "tail"...)
				if stop != 0 || n == 0 {
					b = append(append(append([]byte(nil), run[:n]...), stop), run[n:]...)
				}
				for _, start := range []int{0, 1, 7, 33} {
					if start > len(b) {
						continue
					}
					if got, want := PlainBytes(b, start), plainRef(b, start); got != want {
						t.Fatalf("fill %q, run %d, stop %#x, start %d: %d, want %d", fill, n, stop, start, got, want)
					}
				}
			}
		}
	}
}

func FuzzPlainBytes(f *testing.F) {
	f.Add([]byte(`{"content":"`+strings.Repeat("a", 700)+`\n"}`), 12)
	f.Add(bytes.Repeat([]byte{0xc3, 0xa9, 0x20}, 400), 0)
	f.Fuzz(func(t *testing.T, b []byte, i int) {
		if i < 0 || i > len(b) {
			return
		}
		if got, want := PlainBytes(b, i), plainRef(b, i); got != want {
			t.Fatalf("%d, want %d", got, want)
		}
	})
}

// TestPlainBytesRandom compares the two on random bodies where the
// stopping bytes are rare, as in a long prompt.
func TestPlainBytesRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		b := make([]byte, r.IntN(4*runWindow))
		for j := range b {
			b[j] = byte(0x20 + r.IntN(0x60))
			if r.IntN(300) == 0 {
				b[j] = []byte{'"', '\\', 0x05, 0x80, 0xff}[r.IntN(5)]
			}
		}
		for i := 0; i < len(b); i = plainRef(b, i) + 1 {
			if got, want := PlainBytes(b, i), plainRef(b, i); got != want {
				t.Fatalf("at %d of %d bytes: %d, want %d", i, len(b), got, want)
			}
		}
	}
}

// TestSpecial8LowestMarkExact holds special8's lowest mark to the byte
// loop on words mixing the bytes its subtractions could confuse: the
// ones it looks for, their neighbours, and bytes with the high bit set.
func TestSpecial8LowestMarkExact(t *testing.T) {
	alphabet := []byte{'a', '"', '\\', 0x00, 0x01, 0x1f, 0x20, 0x21, 0x23, 0x5b, 0x5d, 0x7f, 0x80, 0xa2, 0xdc, 0xff}
	r := rand.New(rand.NewPCG(3, 4))
	for range 200000 {
		var w [8]byte
		for j := range w {
			w[j] = alphabet[r.IntN(len(alphabet))]
		}
		want := plainRef(w[:], 0)
		got := 8
		if m := special8(binary.LittleEndian.Uint64(w[:])); m != 0 {
			got = bits.TrailingZeros64(m) >> 3
		}
		if got != want {
			t.Fatalf("% x: first mark at %d, want %d", w, got, want)
		}
	}
}

func BenchmarkPlainBytes(b *testing.B) {
	long := []byte(strings.Repeat("lorem ipsum ", 1<<20/12) + `"`)
	event := []byte(`{"choices":[{"delta":{"content":"hello there, how"}}]}`)
	escaped := []byte(strings.Repeat(strings.Repeat("x", 79)+`\n`, 1<<20/81) + `"`)
	for _, c := range []struct {
		name string
		b    []byte
		at   int
	}{{"1MiB", long, 0}, {"escaped1MiB", escaped, 0}, {"event", event, 34}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.b) - c.at))
			for b.Loop() {
				for i := c.at; i < len(c.b); i = PlainBytes(c.b, i) + 1 {
				}
			}
		})
	}
}
