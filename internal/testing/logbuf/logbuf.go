// Package logbuf is a log sink for tests: a buffer safe for the
// concurrent writes of a running edge or node, and its JSON records.
package logbuf

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
)

// Buffer collects log output; safe for concurrent use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Reset drops what was written.
func (l *Buffer) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Reset()
}

// Records returns the JSON records whose message is msg ("" for all);
// lines that are not JSON are skipped.
func (l *Buffer) Records(msg string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(l.String(), "\n") {
		var r map[string]any
		if json.Unmarshal([]byte(line), &r) == nil && (msg == "" || r["msg"] == msg) {
			out = append(out, r)
		}
	}
	return out
}
