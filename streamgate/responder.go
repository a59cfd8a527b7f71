package streamgate

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// CommitState is how far a response has gone to the client.
type CommitState string

// The commit states. A response is transport_uncommitted until the first
// byte of a JSON body or SSE data event is written: the status line and
// headers are held until then, so an uncommitted request can still be
// replayed or answered with an error status.
const (
	TransportUncommitted CommitState = "transport_uncommitted"
	StreamOpen           CommitState = "stream_open"
	TerminalCommitted    CommitState = "terminal_committed"
)

// responder owns the client side of one response: held status and
// headers, the commit point, per-write deadlines, and the optional commit
// hold. It is safe for use by the runtime and its hold timer.
type responder struct {
	// extra are the host's headers on every response, over the upstream's
	// (the edge's own rate-limit headers for the client's key).
	extra        http.Header
	w            http.ResponseWriter
	rc           *http.ResponseController
	writeTimeout time.Duration
	now          func() time.Time // the wall clock the connection's deadlines are set on (time.Now)

	mu        sync.Mutex // guards the following fields
	state     CommitState
	status    int
	header    http.Header
	held      []byte // commit hold: output not yet released
	heldCount int
	lastTail  [2]byte // the last two bytes written, for clean-boundary checks
	written   int64
	failed    error     // a write failed: the client is gone or too slow
	deadline  time.Time // the client write deadline last set (armDeadline)
	commitAt  time.Time // when the first byte went out
}

// committedAt is when the response committed (zero: not yet).
func (r *responder) committedAt() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.commitAt
}

// newResponder writes through w (so a wrapper such as echo's keeps
// tracking status and size) but flushes and sets deadlines on the writer
// w wraps: echo's Flush panics on ErrNotSupported and drops every other
// flush error, where the server's own writer reports it (FlushError), so
// a failed flush ends the attempt like a failed write.
func newResponder(w http.ResponseWriter, writeTimeout time.Duration) *responder {
	inner := w
	if u, ok := w.(interface{ Unwrap() http.ResponseWriter }); ok {
		inner = u.Unwrap()
	}
	return &responder{w: w, rc: http.NewResponseController(inner), writeTimeout: writeTimeout, now: time.Now,
		state: TransportUncommitted, header: http.Header{}}
}

// validStatus is s when a client may be sent it, else 502: a status
// outside 200–599 (a 1xx, a 0, or a node's invented 42) is never written.
func validStatus(s int) int {
	if s < 200 || s > 599 {
		return http.StatusBadGateway
	}
	return s
}

// State reports the commit state.
func (r *responder) State() CommitState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state
}

// setHead sets the status and headers to send at commit, replacing any
// earlier attempt's. It is a no-op after commit.
func (r *responder) setHead(status int, h http.Header) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state != TransportUncommitted {
		return
	}
	r.status, r.header = status, h
}

// write sends p, committing the response on the first byte. It flushes,
// under a per-write deadline so a client that stops reading is cut off.
func (r *responder) write(p []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writeLocked(p, true)
}

// writeUnflushed is write without the flush: more follows at once, and
// flush (or a later write) sends both.
func (r *responder) writeUnflushed(p []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writeLocked(p, false)
}

// flush sends what writeUnflushed left in the server's buffers.
func (r *responder) flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failed != nil {
		return r.failed
	}
	if err := r.armDeadline(); err != nil {
		return err
	}
	if err := r.rc.Flush(); err != nil {
		return r.writeFailed(err)
	}
	return nil
}

// writeLocked writes p, flushing it to the client when flush is set.
func (r *responder) writeLocked(p []byte, flush bool) error {
	if r.failed != nil {
		return r.failed
	}
	if len(p) == 0 {
		return nil
	}
	if r.state == TransportUncommitted {
		r.commit()
	}
	if err := r.armDeadline(); err != nil {
		return err
	}
	n, err := r.w.Write(p)
	r.written += int64(n)
	if n >= 2 {
		r.lastTail = [2]byte{p[n-2], p[n-1]}
	} else if n == 1 {
		r.lastTail = [2]byte{r.lastTail[1], p[0]}
	}
	if err == nil && flush {
		err = r.rc.Flush()
	}
	if err != nil {
		return r.writeFailed(err)
	}
	return nil
}

// commit writes the response's status and headers: the response is
// committed. It is apart from writeLocked, whose frame is under the first
// write's (net/http's header write is deep).
func (r *responder) commit() {
	dst := r.w.Header()
	for k, v := range r.header {
		dst[k] = v
	}
	for k, v := range r.extra {
		dst[k] = v
	}
	// The writer's map holds the head now: a held stream keeps no second
	// map of it.
	r.header = nil
	if r.status == 0 {
		r.status = http.StatusOK
	}
	r.w.WriteHeader(validStatus(r.status))
	r.state, r.commitAt = StreamOpen, time.Now()
}

// writeFailed fails the response with a write's error.
func (r *responder) writeFailed(err error) error {
	r.failed = fmt.Errorf("writing to the client: %w", err)
	return r.failed
}

// deadlineSlack is the fraction of the write timeout by which the
// client's write deadline may lag: a deadline is moved only once it is
// that much older than a fresh one would be, so a stream of small writes
// does not re-arm the connection's timer for each (every write still
// gets at least 31/32 of the timeout).
const deadlineSlack = 32

// armDeadline bounds the next write by the write timeout (under r.mu).
func (r *responder) armDeadline() error {
	if r.writeTimeout <= 0 {
		return nil
	}
	d := r.now().Add(r.writeTimeout)
	if d.Sub(r.deadline) < r.writeTimeout/deadlineSlack {
		return nil
	}
	if err := r.rc.SetWriteDeadline(d); err != nil && !errors.Is(err, http.ErrNotSupported) {
		r.failed = fmt.Errorf("setting the client write deadline: %w", err)
		return r.failed
	}
	r.deadline = d
	return nil
}

// hold buffers p instead of writing it while a commit hold is active.
func (r *responder) hold(p []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held = append(r.held, p...)
	r.heldCount++
}

// fail marks the response failed: the next write reports err.
func (r *responder) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failed == nil {
		r.failed = err
	}
}

// releaseFromTimer is release for the commit-hold timer's goroutine,
// which no handler's recover covers: a panic there fails the response
// (the attempt then ends on its next write) instead of the process.
func (r *responder) releaseFromTimer() {
	defer func() {
		if v := recover(); v != nil {
			r.mu.Lock()
			r.failed = fmt.Errorf("releasing held output: %v", v)
			r.mu.Unlock()
		}
	}()
	_ = r.release()
}

// release writes held output (committing) and ends the hold.
func (r *responder) release() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.held
	r.held, r.heldCount = nil, 0
	return r.writeLocked(p, true)
}

// discardHeld drops held output of a failed attempt.
func (r *responder) discardHeld() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held, r.heldCount = nil, 0
}

func (r *responder) heldEvents() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.heldCount
}

// endsOn reports whether the output so far ends with suffix (1 or 2
// bytes), i.e. on an event boundary.
func (r *responder) endsOn(suffix string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.written == 0 {
		return true
	}
	if len(suffix) == 1 {
		return r.lastTail[1] == suffix[0]
	}
	return r.lastTail[0] == suffix[0] && r.lastTail[1] == suffix[1]
}

// terminal marks the response complete.
func (r *responder) terminal() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state == StreamOpen {
		r.state = TerminalCommitted
	}
}

// respond writes a complete response (status, headers, body) when nothing
// was committed yet, with its Content-Length, and marks it terminal.
func (r *responder) respond(status int, h http.Header, body []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state != TransportUncommitted {
		return errors.New("response already committed")
	}
	r.status, r.header = status, h
	r.held = nil
	if len(body) == 0 {
		for k, v := range h {
			r.w.Header()[k] = v
		}
		for k, v := range r.extra {
			r.w.Header()[k] = v
		}
		r.w.WriteHeader(validStatus(status))
		r.state, r.commitAt = TerminalCommitted, time.Now()
		return nil
	}
	// A whole body goes out with its length and is not flushed here: the
	// server writes the head and the body in one write when the handler
	// returns (after its log and metrics, as a chunked body's last chunk
	// was), and the client reads no chunked framing.
	r.w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	err := r.writeLocked(body, false)
	r.state = TerminalCommitted
	return err
}

// respondHead answers with the head setHead took and an empty body, when
// nothing was committed yet (a streamed or binary answer without a byte).
func (r *responder) respondHead() error {
	r.mu.Lock()
	status, h := r.status, r.header
	r.mu.Unlock()
	return r.respond(status, h, nil)
}

// abort ends the client connection abruptly: the only honest end when
// not even a typed error can be written.
func abort() { panic(http.ErrAbortHandler) }
