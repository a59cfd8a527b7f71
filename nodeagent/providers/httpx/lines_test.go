package httpx

import (
	"io"
	"strings"
	"testing"
)

// trickle returns one byte per Read and counts the Reads.
type trickle struct {
	s     string
	reads int
}

func (t *trickle) Read(p []byte) (int, error) {
	t.reads++
	if t.s == "" {
		return 0, io.EOF
	}
	p[0] = t.s[0]
	t.s = t.s[1:]
	return 1, nil
}

func TestLineReaderReturnsAtLineBreaks(t *testing.T) {
	for _, in := range []string{"abc\ndef\n", "abc\r\ndef", "abc\rdef\r", strings.Repeat("x", 100)} {
		lr := LineReader(&trickle{s: in})
		buf := make([]byte, 64)
		var got []string
		var all strings.Builder
		for {
			n, err := lr.Read(buf)
			got = append(got, string(buf[:n]))
			all.Write(buf[:n])
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if all.String() != in {
			t.Fatalf("%q: read %q", in, all.String())
		}
		for _, piece := range got[:len(got)-1] {
			if len(piece) < len(buf) && !strings.ContainsAny(piece, "\r\n") {
				t.Fatalf("%q: returned %q early, before a line break or a full buffer (%q)", in, piece, got)
			}
		}
		if strings.HasPrefix(in, "abc\n") && got[0] != "abc\n" {
			t.Fatalf("first line not delivered as soon as complete: %q", got)
		}
	}
}
