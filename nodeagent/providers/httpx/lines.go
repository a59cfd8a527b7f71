package httpx

import (
	"bytes"
	"io"
)

// LineReader wraps an upstream stream body for a line-oriented parser
// built on bufio.Scanner (go-sse's reader). A Scanner re-runs its split
// function over everything buffered after every Read, so an event that
// arrives in many small pieces costs time quadratic in its size: a 2 MiB
// line trickled in 256-byte reads took 11 s of CPU. LineReader keeps
// reading into the caller's buffer until a piece holds a line break (the
// only thing that can complete a token), the buffer is full, or the body
// ends, which makes the Scanner's work linear. Latency is unchanged: a
// piece without a line break could not have produced an event anyway.
func LineReader(r io.Reader) io.Reader { return &lineReader{r: r} }

type lineReader struct{ r io.Reader }

func (l *lineReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := l.r.Read(p[n:])
		if m > 0 && bytes.ContainsAny(p[n:n+m], "\r\n") {
			return n + m, err
		}
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
