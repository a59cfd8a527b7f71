package eventstream

import (
	"bytes"
	"testing"
)

// TestChunks: a chunk is a copy its receiver owns; a released chunk is
// reused by a later copy of a size it holds, never handed out twice.
func TestChunks(t *testing.T) {
	src := []byte("data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n")
	a := Chunk(src)
	if !bytes.Equal(a, src) || &a[0] == &src[0] {
		t.Fatal("a chunk is not a copy of its source")
	}
	ReleaseChunk(a)
	b := Chunk([]byte("xyz"))
	if string(b) != "xyz" || cap(b) != 256 {
		t.Fatalf("after a release: %q, cap %d; want a pooled 256-byte buffer", b, cap(b))
	}
	c := Chunk([]byte("abc"))
	if &b[:1][0] == &c[:1][0] {
		t.Fatal("one buffer handed out twice")
	}
	if string(b) != "xyz" || string(c) != "abc" {
		t.Fatalf("chunks share bytes: %q %q", b, c)
	}
	big := make([]byte, 40<<10)
	ReleaseChunk(big) // larger than the largest size: pooled as the largest
	d := Chunk(make([]byte, 20<<10))
	if cap(d) != 32<<10 || len(d) != 20<<10 {
		t.Fatalf("a 20 KiB chunk: len %d cap %d", len(d), cap(d))
	}
	if e := Chunk(big[:0]); e != nil {
		t.Fatalf("an empty chunk: cap %d, want nil (nothing to give back)", cap(e))
	}
	ReleaseChunk(make([]byte, 100)) // below the smallest size: dropped
	for range 2 * chunkPoolBytes / 256 {
		ReleaseChunk(make([]byte, 0, 256)) // the pool stays bounded
	}
	if n := len(chunkPools[0]); n != chunkPoolBytes/256 {
		t.Fatalf("the 256-byte pool holds %d, want its bound %d", n, chunkPoolBytes/256)
	}
}

// BenchmarkChunk: a pooled copy and its release.
func BenchmarkChunk(b *testing.B) {
	p := bytes.Repeat([]byte("x"), 180)
	b.ReportAllocs()
	for b.Loop() {
		ReleaseChunk(Chunk(p))
	}
}
