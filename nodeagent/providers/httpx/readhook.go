package httpx

import (
	"context"
	"io"
)

// A read hook runs right before a pump blocks on its upstream again:
// everything the last read produced has been emitted by then, so the
// caller (the node's link) can send it as one message without delaying
// any of it. Pumps that read an upstream body call it before every read.

type readHookKey struct{}

// WithReadHook returns ctx carrying hook for the pumps that run under it.
func WithReadHook(ctx context.Context, hook func()) context.Context {
	return context.WithValue(ctx, readHookKey{}, hook)
}

// hooked wraps an upstream body so ctx's read hook, if any, runs before
// each read.
func hooked(ctx context.Context, body io.ReadCloser) io.ReadCloser {
	hook, _ := ctx.Value(readHookKey{}).(func())
	if hook == nil {
		return body
	}
	return hookedBody{ReadCloser: body, before: hook}
}

type hookedBody struct {
	io.ReadCloser
	before func()
}

func (b hookedBody) Read(p []byte) (int, error) {
	b.before()
	return b.ReadCloser.Read(p)
}
