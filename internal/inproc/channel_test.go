package inproc

import (
	"context"
	"errors"
	"io"
	"maps"
	"runtime"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// An echo service described by hand, as generated code describes one.
type echoServer struct {
	handle func(grpc.ServerStream) error
}

var echoDesc = grpc.ServiceDesc{
	ServiceName: "test.Echo",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName: "Chat", ServerStreams: true, ClientStreams: true,
		Handler: func(srv any, ss grpc.ServerStream) error { return srv.(*echoServer).handle(ss) },
	}},
}

// byReference hands the message over: dst takes src's value.
func byReference(dst, src any) error {
	proto.Reset(dst.(proto.Message))
	proto.Merge(dst.(proto.Message), src.(proto.Message))
	return nil
}

func newEcho(t *testing.T, handle func(grpc.ServerStream) error, intercept grpc.StreamServerInterceptor) *Channel {
	t.Helper()
	ch := New(byReference, intercept)
	ch.RegisterService(&echoDesc, &echoServer{handle: handle})
	return ch
}

func open(t *testing.T, ctx context.Context, ch *Channel) *grpc.GenericClientStream[wrapperspb.StringValue, wrapperspb.StringValue] {
	t.Helper()
	cs, err := ch.NewStream(ctx, &echoDesc.Streams[0], "/test.Echo/Chat")
	if err != nil {
		t.Fatal(err)
	}
	return &grpc.GenericClientStream[wrapperspb.StringValue, wrapperspb.StringValue]{ClientStream: cs}
}

// echo answers every message until the client half-closes, then returns
// nil: every message sent arrives, in order, and the client sees io.EOF
// after the last answer.
func echo(ss grpc.ServerStream) error {
	for {
		m := new(wrapperspb.StringValue)
		if err := ss.RecvMsg(m); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if err := ss.SendMsg(wrapperspb.String("re: " + m.GetValue())); err != nil {
			return err
		}
	}
}

func TestStreamCarriesMessagesInOrderThenEOF(t *testing.T) {
	st := open(t, t.Context(), newEcho(t, echo, nil))
	go func() {
		for _, v := range []string{"a", "b", "c"} {
			if err := st.Send(wrapperspb.String(v)); err != nil {
				t.Error(err)
			}
		}
		_ = st.CloseSend()
	}()
	for _, want := range []string{"re: a", "re: b", "re: c"} {
		m, err := st.Recv()
		if err != nil || m.GetValue() != want {
			t.Fatalf("got %q %v, want %q", m.GetValue(), err, want)
		}
	}
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("after the handler returned nil: %v, want io.EOF", err)
	}
	if st.Context().Err() == nil {
		t.Fatal("the client's context is still live after the end")
	}
}

// A handler's last messages reach the client before its status, however
// the two race; an error without a status is codes.Unknown, as a network
// server reports it; a send after the end is io.EOF.
func TestHandlerStatusAfterItsMessages(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code codes.Code
	}{
		{status.Error(codes.ResourceExhausted, "full"), codes.ResourceExhausted},
		{errors.New("plain"), codes.Unknown},
		{context.Canceled, codes.Canceled},
	} {
		ch := newEcho(t, func(ss grpc.ServerStream) error {
			_ = ss.SendMsg(wrapperspb.String("last"))
			return tc.err
		}, nil)
		for range 50 {
			st := open(t, t.Context(), ch)
			m, err := st.Recv()
			if err != nil || m.GetValue() != "last" {
				t.Fatalf("%v: first recv %v %v", tc.err, m, err)
			}
			if _, err := st.Recv(); status.Code(err) != tc.code {
				t.Fatalf("%v: status %v, want %v", tc.err, err, tc.code)
			}
			if err := st.Send(wrapperspb.String("late")); err != io.EOF {
				t.Fatalf("send after the end: %v, want io.EOF", err)
			}
		}
	}
}

// Cancelling the client's context ends the handler's context and fails
// both ends with codes.Canceled; the handler's goroutine ends.
func TestClientCancelEndsTheHandler(t *testing.T) {
	ended := make(chan error, 1)
	ch := newEcho(t, func(ss grpc.ServerStream) error {
		<-ss.Context().Done()
		err := ss.SendMsg(wrapperspb.String("x"))
		ended <- err
		return err
	}, nil)
	waitNoHandler(t) // an earlier test's handler, still ending, would skew the count
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(t.Context())
	st := open(t, ctx, ch)
	if n := runtime.NumGoroutine(); n != before+1 {
		t.Fatalf("a stream costs %d goroutines, want 1 (the handler's)", n-before)
	}
	cancel()
	select {
	case err := <-ended:
		if status.Code(err) != codes.Canceled {
			t.Fatalf("handler's send after cancel: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the handler's context did not end with the client's")
	}
	if _, err := st.Recv(); status.Code(err) != codes.Canceled {
		t.Fatalf("client recv after cancel: %v", err)
	}
}

// TestAfterEndTellsTheClientWithoutARead: the client learns that the
// handler returned (or that its own context ended) through AfterEnd,
// with no goroutine of its own reading the stream; a stopped AfterEnd
// never runs.
func TestAfterEndTellsTheClientWithoutARead(t *testing.T) {
	finish := make(chan struct{})
	ch := newEcho(t, func(ss grpc.ServerStream) error {
		<-finish
		return nil
	}, nil)
	type ender interface{ AfterEnd(func()) func() bool }
	told, never := make(chan struct{}), make(chan struct{})
	st := open(t, t.Context(), ch)
	st.ClientStream.(ender).AfterEnd(func() { close(told) })
	stop := st.ClientStream.(ender).AfterEnd(func() { close(never) })
	if !stop() {
		t.Fatal("a pending AfterEnd could not be stopped")
	}
	select {
	case <-told:
		t.Fatal("told of an end before the handler returned")
	default:
	}
	close(finish)
	select {
	case <-told:
	case <-time.After(5 * time.Second):
		t.Fatal("the handler returned and the client was not told")
	}
	select {
	case <-never:
		t.Fatal("a stopped AfterEnd ran")
	default:
	}

	// The client's own cancellation ends the stream too.
	ch2 := newEcho(t, func(ss grpc.ServerStream) error { <-ss.Context().Done(); return nil }, nil)
	ctx, cancel := context.WithCancel(t.Context())
	told2 := make(chan struct{})
	open(t, ctx, ch2).ClientStream.(ender).AfterEnd(func() { close(told2) })
	cancel()
	select {
	case <-told2:
	case <-time.After(5 * time.Second):
		t.Fatal("the client cancelled and AfterEnd did not run")
	}
}

// The handler sees the client's outgoing metadata as incoming, a peer,
// the client's deadline and none of its values; the interceptor runs
// around it and can refuse the stream.
func TestHandlerContextAndInterceptor(t *testing.T) {
	type key struct{}
	deadline := time.Now().Add(time.Hour)
	got := make(chan context.Context, 1)
	intercept := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		md, _ := metadata.FromIncomingContext(ss.Context())
		if info.FullMethod != "/test.Echo/Chat" || !info.IsClientStream || !info.IsServerStream {
			return status.Errorf(codes.Internal, "info %+v", info)
		}
		if v := md.Get("authorization"); len(v) != 1 || v[0] != "Bearer ok" {
			return status.Error(codes.Unauthenticated, "no")
		}
		return h(srv, ss)
	}
	ch := newEcho(t, func(ss grpc.ServerStream) error { got <- ss.Context(); return nil }, intercept)
	ctx, cancel := context.WithDeadline(context.WithValue(t.Context(), key{}, "secret"), deadline)
	defer cancel()
	if _, err := open(t, metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer bad"), ch).Recv(); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("refused by the interceptor: %v", err)
	}
	st := open(t, metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer ok"), ch)
	if _, err := st.Recv(); err != io.EOF {
		t.Fatal(err)
	}
	sctx := <-got
	if d, ok := sctx.Deadline(); !ok || !d.Equal(deadline) {
		t.Fatalf("deadline %v %v", d, ok)
	}
	if sctx.Value(key{}) != nil {
		t.Fatal("the client's context values reached the handler")
	}
	if p, ok := peer.FromContext(sctx); !ok || p.Addr.String() != "inproc" {
		t.Fatalf("peer %v", p)
	}
	if m, ok := grpc.Method(sctx); !ok || m != "/test.Echo/Chat" {
		t.Fatalf("method %q", m)
	}
}

// Streams whose clients send the same metadata share one incoming copy;
// each handler still sees exactly its client's metadata, and what a
// handler does to the copy FromIncomingContext gave it reaches no other
// stream.
func TestIncomingMetadataPerStream(t *testing.T) {
	seen := make(chan metadata.MD, 1)
	ch := newEcho(t, func(ss grpc.ServerStream) error {
		md, _ := metadata.FromIncomingContext(ss.Context())
		seen <- md.Copy()
		if md != nil {
			md.Set("authorization", "changed by a handler")
			md.Append("x-extra", "added by a handler")
		}
		return nil
	}, nil)
	for i, c := range []struct {
		pairs []string
		want  metadata.MD
	}{
		{[]string{"authorization", "Bearer a"}, metadata.Pairs("authorization", "Bearer a")},
		{[]string{"authorization", "Bearer a"}, metadata.Pairs("authorization", "Bearer a")},
		{[]string{"authorization", "Bearer b"}, metadata.Pairs("authorization", "Bearer b")},
		{[]string{"authorization", "Bearer b", "x-run", "r1"}, metadata.Pairs("authorization", "Bearer b", "x-run", "r1")},
		{[]string{"authorization", "Bearer a"}, metadata.Pairs("authorization", "Bearer a")},
		{nil, nil},
	} {
		ctx := t.Context()
		if c.pairs != nil {
			ctx = metadata.AppendToOutgoingContext(ctx, c.pairs...)
		}
		if _, err := open(t, ctx, ch).Recv(); err != io.EOF {
			t.Fatal(err)
		}
		if got := <-seen; !maps.EqualFunc(got, c.want, slices.Equal) || (c.want == nil) != (len(got) == 0) {
			t.Errorf("stream %d: the handler saw %v, want %v", i, got, c.want)
		}
	}
}

func TestUnknownMethodAndUnaryAreUnimplemented(t *testing.T) {
	ch := newEcho(t, echo, nil)
	if _, err := ch.NewStream(t.Context(), &grpc.StreamDesc{}, "/test.Echo/Nope"); status.Code(err) != codes.Unimplemented {
		t.Fatalf("unknown method: %v", err)
	}
	if err := ch.Invoke(t.Context(), "/test.Echo/Chat", nil, nil); status.Code(err) != codes.Unimplemented {
		t.Fatalf("unary: %v", err)
	}
}

// The client's header arrives with the first message.
func TestHeaderWithTheFirstMessage(t *testing.T) {
	ch := newEcho(t, func(ss grpc.ServerStream) error {
		_ = grpc.SetHeader(ss.Context(), metadata.Pairs("k", "v"))
		_ = ss.SendMsg(wrapperspb.String("x"))
		ss.SetTrailer(metadata.Pairs("t", "u"))
		return nil
	}, nil)
	st := open(t, t.Context(), ch)
	h, err := st.Header()
	if err != nil || len(h.Get("k")) != 1 {
		t.Fatalf("header %v %v", h, err)
	}
	for {
		if _, err := st.Recv(); err != nil {
			break
		}
	}
	if tr := st.Trailer(); len(tr.Get("t")) != 1 {
		t.Fatalf("trailer %v", tr)
	}
}

// A client that cancelled its context gets codes.Canceled even when the
// handler has already answered the cancellation by ending the stream
// with nil — by returning, or, detached, from a watcher of its context
// running on a goroutine of its own — whether the client reads before or
// after that end; a client that saw the end keeps seeing it (io.EOF, its
// header), never the cancellation of its stream's context that follows.
func TestEndAndCancelNeverRace(t *testing.T) {
	ended := make(chan struct{}, 1)
	handlers := map[string]func(grpc.ServerStream) error{
		"returns": func(ss grpc.ServerStream) error {
			<-ss.Context().Done()
			defer func() { ended <- struct{}{} }()
			return nil
		},
		"detached": func(ss grpc.ServerStream) error {
			end, _ := Detach(ss.Context())
			context.AfterFunc(ss.Context(), func() { end(nil); ended <- struct{}{} })
			return nil
		},
	}
	for name, h := range handlers {
		ch := newEcho(t, h, nil)
		for i := range 300 {
			ctx, cancel := context.WithCancel(t.Context())
			st := open(t, ctx, ch)
			cancel()
			if i%2 == 0 {
				<-ended
			}
			if _, err := st.Recv(); status.Code(err) != codes.Canceled {
				t.Fatalf("%s, try %d: recv after cancel: %v", name, i, err)
			}
			if i%2 == 1 {
				<-ended
			}
		}
	}

	ends := newEcho(t, func(ss grpc.ServerStream) error {
		ss.SetHeader(metadata.Pairs("k", "v"))
		return nil
	}, nil)
	for i := range 50 {
		st := open(t, t.Context(), ends)
		for j := range 4 {
			if _, err := st.Recv(); err != io.EOF {
				t.Fatalf("try %d, recv %d after the end: %v", i, j, err)
			}
			if md, err := st.Header(); err != nil || md.Get("k")[0] != "v" {
				t.Fatalf("try %d, header %d after the end: %v %v", i, j, md, err)
			}
		}
	}
}
