package eventstream

import "sync"

// Read sizes of an upstream body pump. A token stream's reads are a few
// hundred bytes and an open stream keeps its buffer while it waits for
// the next token, so a pump starts with the small buffer and moves up a
// size each time a read fills the one it has (a large body, a burst).
var readSizes = [...]int{512, 4 << 10, 32 << 10}

// readPools recycle read buffers, one pool per size in readSizes.
var readPools [len(readSizes)]sync.Pool

func init() {
	for i, n := range readSizes {
		readPools[i].New = func() any { b := make([]byte, n); return &b }
	}
}

// ReadBuf is a pump's pooled read buffer. Not safe for concurrent use.
type ReadBuf struct {
	b    *[]byte
	size int // index into readSizes
}

// NewReadBuf returns the smallest buffer; Release it when the pump ends.
func NewReadBuf() *ReadBuf { return &ReadBuf{b: readPools[0].Get().(*[]byte)} }

// Bytes is the buffer to read into.
func (r *ReadBuf) Bytes() []byte { return *r.b }

// Grow moves to the next size after a read of n bytes filled the buffer.
func (r *ReadBuf) Grow(n int) {
	if n == len(*r.b) && r.size+1 < len(readSizes) {
		r.Release()
		r.size++
		r.b = readPools[r.size].Get().(*[]byte)
	}
}

// Release returns the buffer to its pool.
func (r *ReadBuf) Release() { readPools[r.size].Put(r.b) }
