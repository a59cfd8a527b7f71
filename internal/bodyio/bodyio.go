// Package bodyio reads request bodies.
package bodyio

import "io"

// ReadAll reads r to its end into a buffer sized for the size announced
// (Content-Length; -1 when unknown), so a body that keeps its word is read
// into one allocation instead of io.ReadAll's doubling copies. The
// announcement only sizes the buffer: what arrives decides.
func ReadAll(r io.Reader, announced int64) ([]byte, error) {
	if announced <= 0 {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, announced+1) // +1: the read that finds the end needs room
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // more than announced: grow as append does
		}
	}
}
