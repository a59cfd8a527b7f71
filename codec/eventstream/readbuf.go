package eventstream

import "sync"

// Read sizes of an upstream body pump. A token stream's reads are a few
// hundred bytes and an open stream keeps its buffer while it waits, so a
// pump starts with the small buffer and moves to the large one once a
// read fills the small one (a large body, a burst).
const (
	smallRead = 4 << 10
	largeRead = 32 << 10
)

// readPools recycle read buffers by size: one per running pump.
var readPools = map[int]*sync.Pool{
	smallRead: {New: func() any { b := make([]byte, smallRead); return &b }},
	largeRead: {New: func() any { b := make([]byte, largeRead); return &b }},
}

// ReadBuf is a pump's pooled read buffer. Not safe for concurrent use.
type ReadBuf struct{ b *[]byte }

// NewReadBuf returns a small buffer; Release it when the pump ends.
func NewReadBuf() *ReadBuf { return &ReadBuf{b: readPools[smallRead].Get().(*[]byte)} }

// Bytes is the buffer to read into.
func (r *ReadBuf) Bytes() []byte { return *r.b }

// Grow moves to the large buffer after a read of n bytes filled the
// small one.
func (r *ReadBuf) Grow(n int) {
	if n == len(*r.b) && n == smallRead {
		r.Release()
		r.b = readPools[largeRead].Get().(*[]byte)
	}
}

// Release returns the buffer to its pool.
func (r *ReadBuf) Release() { readPools[len(*r.b)].Put(r.b) }
