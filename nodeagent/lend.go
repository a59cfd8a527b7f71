package nodeagent

import (
	"context"

	"google.golang.org/grpc"
)

// Lent reads: on the in-process channel a streamed answer's upstream
// reads run on the edge's goroutine that forwards them (internal/inproc's
// Lend).
// Otherwise each chunk is read on the attempt's goroutine here and handed
// to the edge's, which must wake to take it: two goroutine wakeups per
// chunk where a proxy has one. Lent, the edge's receive runs the read,
// the node's emitter and coalescer run inside it as they would here, and
// the message it produces is taken on the goroutine the read woke; the
// attempt's goroutine waits for the body's end and sends the rest.

// streamLender is a client stream that lends a read to its receiver:
// the in-process channel's (internal/inproc).
type streamLender interface {
	Lend(ctx context.Context, step func() (done bool)) (complete bool)
}

type lenderKey struct{}

// lendReads marks ctx so the attempts started under it lend their reads
// to the receiver of cs, the in-process stream they answer on (nil over
// the network, where nothing is lent).
func lendReads(ctx context.Context, cs grpc.ClientStream) context.Context {
	l, ok := cs.(streamLender)
	if !ok {
		return ctx
	}
	return context.WithValue(ctx, lenderKey{}, l)
}

// lenderOf is the stream ctx's attempt lends its reads to (nil: none).
func lenderOf(ctx context.Context) streamLender {
	l, _ := ctx.Value(lenderKey{}).(streamLender)
	return l
}

// lend lends the provider's reads to the edge's receive on l while its
// answer streams (a whole answer goes as one message at its end: lending
// its reads would add a handoff, not save one). While lent, every step
// sends what its read produced before it returns and nothing else sends,
// so the age timer rests: a step is the only sender Lend allows.
func (o *outbound) lend(ctx context.Context, l streamLender, step func() bool) bool {
	o.mu.Lock()
	if o.co.whole || o.sendErr != nil {
		o.mu.Unlock()
		return false
	}
	o.lending = true
	if o.armed {
		o.aged.Stop()
		o.armed = false
	}
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		o.lending = false
		o.mu.Unlock()
	}()
	return l.Lend(ctx, step)
}
