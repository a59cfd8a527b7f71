package eventstream

import "sync/atomic"

// Chunks carry the bytes of one upstream read from the provider that read
// them to the writer of the client's response. A tunnelled stream makes
// one per read, so they were most of the bytes a stream allocated (half,
// for a 128-token answer) and, through the collections those bytes
// paced, about a tenth of its CPU. In one process — iop dev, an all-in-one
// gateway, the node's frames handed over by reference on the in-process
// channel — the writer gives each back once written (ReleaseChunk) and
// the next read's copy reuses it.
//
// A chunk is given back only by the last holder of its bytes; one that
// is never given back is collected like any other slice. Pools are
// bounded (chunkPoolBytes per size), so a burst leaves at most that much
// behind.
var chunkSizes = [...]int{256, 512, 1 << 10, 2 << 10, 4 << 10, 8 << 10, 16 << 10, 32 << 10}

// chunkPoolBytes bounds the bytes each size's pool keeps.
const chunkPoolBytes = 256 << 10

var (
	chunkPools [len(chunkSizes)]chan []byte
	// chunksReleased is set at the first ReleaseChunk: until a process
	// gives chunks back (a remote node's never are: the edge's copy is
	// the one it unmarshals), a chunk is allocated at its exact size.
	chunksReleased atomic.Bool
)

func init() {
	for i, n := range chunkSizes {
		chunkPools[i] = make(chan []byte, chunkPoolBytes/n)
	}
}

// Chunk returns a copy of p that its receiver owns, in a pooled buffer
// when one is free (nil for an empty p).
func Chunk(p []byte) []byte {
	if len(p) == 0 {
		return nil
	}
	i := chunkSizeFor(len(p))
	if i < 0 {
		return append([]byte(nil), p...)
	}
	select {
	case b := <-chunkPools[i]:
		return append(b, p...)
	default:
	}
	if !chunksReleased.Load() {
		return append([]byte(nil), p...)
	}
	return append(make([]byte, 0, chunkSizes[i]), p...)
}

// ReleaseChunk gives back b, which nothing refers to any more (its bytes
// were written, or copied where they are kept), nor to any byte of the
// array under it. Such a slice may be given back whoever made it (the
// edge gives back what protobuf unmarshalled too); one smaller than the
// smallest size is dropped.
func ReleaseChunk(b []byte) {
	if !chunksReleased.Load() {
		chunksReleased.Store(true)
	}
	i := len(chunkSizes) - 1 // the largest size b holds
	for i >= 0 && chunkSizes[i] > cap(b) {
		i--
	}
	if i < 0 {
		return
	}
	select {
	case chunkPools[i] <- b[:0:chunkSizes[i]]:
	default:
	}
}

// chunkSizeFor is the index of the smallest chunk size of at least n
// bytes, or -1 (larger than the largest).
func chunkSizeFor(n int) int {
	for i, s := range chunkSizes {
		if n <= s {
			return i
		}
	}
	return -1
}
