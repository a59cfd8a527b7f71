package streamgate

import (
	"context"
	"net/http/httptest"
	"sync"
)

// lockedRecorder is an httptest.ResponseRecorder safe to read while the
// runtime writes (the hold timer writes from its own goroutine).
type lockedRecorder struct {
	*httptest.ResponseRecorder
	mu sync.Mutex
}

func newRecorder() *lockedRecorder { return &lockedRecorder{ResponseRecorder: httptest.NewRecorder()} }

func (r *lockedRecorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ResponseRecorder.Write(p)
}

func (r *lockedRecorder) BodyString() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.Body.String()
}

func contextBackground() context.Context { return context.Background() }
func contextWithCancel() (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}
