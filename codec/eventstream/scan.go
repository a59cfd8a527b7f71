package eventstream

import (
	"errors"
	"io"
)

// Scan reads src to its end, calling fn for each event as soon as the
// bytes that complete it arrive; fn returning false stops the scan. The
// error is the read error that ended the stream, nil at a clean end or
// when fn stopped.
func Scan(src io.Reader, f Format, max int, fn func(Event) bool) error {
	r := NewReader(f, max)
	stopped := false
	call := func(ev Event) {
		if !stopped && !fn(ev) {
			stopped = true
		}
	}
	buf := NewReadBuf()
	defer func() { buf.Release() }()
	for {
		n, err := src.Read(buf.Bytes())
		if n > 0 {
			r.Feed(buf.Bytes()[:n], call)
			if stopped {
				return nil
			}
			buf.Grow(n)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				r.Close(call)
				return nil
			}
			return err
		}
	}
}
