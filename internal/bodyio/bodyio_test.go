package bodyio

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestReadAllWhateverTheAnnouncement: the body read is what arrives —
// shorter, exactly as long or longer than announced, in small reads —
// and a read error is returned.
func TestReadAllWhateverTheAnnouncement(t *testing.T) {
	body := strings.Repeat("abcdefgh", 1000)
	for _, announced := range []int64{-1, 0, 1, 100, 7999, 8000, 8001, 1 << 20} {
		got, err := ReadAll(iotest.OneByteReader(strings.NewReader(body)), announced)
		if err != nil || string(got) != body {
			t.Fatalf("announced %d: %d bytes, %v", announced, len(got), err)
		}
	}
	boom := errors.New("boom")
	if _, err := ReadAll(io.MultiReader(bytes.NewReader([]byte("ab")), iotest.ErrReader(boom)), 10); !errors.Is(err, boom) {
		t.Fatalf("read error: %v", err)
	}
}
