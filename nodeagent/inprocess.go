package nodeagent

import (
	"context"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/iopgw/iop/wire"
)

// runInProcess keeps one session to an edge in this process alive until
// ctx ends: the same session as over the network, on the edge's
// in-process channel. A session the edge ends (a reload that removed the
// node, a restart of the hub) is opened again after the link's backoff.
func (a *Agent) runInProcess(ctx context.Context, addr string, ch grpc.ClientConnInterface) error {
	client := wire.NewNodeLinkClient(tokenChannel{ch: ch, bearer: "Bearer " + a.cfg.Token})
	log := a.log.With(slog.String("edge", addr))
	a.links.up.WithLabelValues(addr).Set(0)
	retry := 0
	for ctx.Err() == nil {
		welcomed, err := a.session(ctx, addr, client, log)
		if ctx.Err() != nil {
			return nil
		}
		if welcomed {
			retry = 0
		}
		delay := backoffDelay(retry)
		retry++
		log.Warn("in-process edge session ended", slog.String("error", err.Error()), slog.Duration("retry_in", delay))
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	return nil
}

// tokenChannel sends the node token with every call on an in-process
// channel, as tokenCreds does on a network connection.
type tokenChannel struct {
	ch     grpc.ClientConnInterface
	bearer string // "Bearer " and the token, made once
}

func (t tokenChannel) ctx(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", t.bearer)
}

func (t tokenChannel) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	return t.ch.Invoke(t.ctx(ctx), method, args, reply, opts...)
}

func (t tokenChannel) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return t.ch.NewStream(t.ctx(ctx), desc, method, opts...)
}
