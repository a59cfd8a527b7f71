// Package httpx holds what the HTTP-speaking providers (ollama, openai)
// share: the upstream HTTP client, the tunnel pump that carries an
// upstream response as frames, usage sniffing, and upstream error parsing.
package httpx

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"

	oai "github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/internal/httphdr"
)

// ReadBufferSize and WriteBufferSize size the buffers each upstream
// HTTP/1 connection reads responses and writes requests through, held for
// the connection's life — for every held stream, since a streamed answer
// keeps its connection: 1 KiB each instead of net/http's 4 KiB, 6 KiB
// less per open stream. What they cost is a read or a write more where a
// message crosses them, never a byte: a request is headers and a body the
// node already holds, and a body larger than the buffer is written
// straight from its bytes, so a request of 1–4 KiB takes two writes
// instead of one; a model's paced tokens are one read each whatever the
// buffer, and a burst larger than the buffer (events piled up, a JSON
// answer over 1 KiB) is taken from the socket in one more read, into a
// pooled buffer held only until it is read (aheadConn: 32 events written
// at once, 6.5 reads a stream instead of 12.2); a large unchunked body is
// read around the buffer once the pump's own has grown (ReadBuf). An
// HTTP/2 upstream (TLS) uses the HTTP/2 transport's own buffers, one set
// per connection, not per stream.
const (
	ReadBufferSize  = 1 << 10
	WriteBufferSize = 1 << 10
)

// Credentials are what a node injects into every upstream request.
type Credentials struct {
	APIKey  string            // sent as Authorization: Bearer <APIKey>
	Headers map[string]string // extra configured headers
	// Forward names credential-scoped client headers (OpenAI-Organization,
	// OpenAI-Project, …) this provider passes on; by default they are
	// stripped so a client cannot choose what the node's key bills.
	Forward []string
}

// Apply sets the node's credentials on h, replacing any client value.
func (c Credentials) Apply(h http.Header) {
	h.Del("Authorization")
	for k, v := range c.Headers {
		h.Set(k, v)
	}
	if c.APIKey != "" {
		h.Set("Authorization", "Bearer "+c.APIKey)
	}
}

// NewRequest builds an upstream request: the client's end-to-end headers
// (filtered again here, so no client credential can reach a provider)
// plus the node's credentials. clientHeader becomes the request's header:
// it is filtered in place (the node's own map, decoded from the link),
// not copied.
func NewRequest(ctx context.Context, method, url string, clientHeader map[string][]string, body []byte, cred Credentials) (*http.Request, error) {
	var rd io.Reader
	if len(body) > 0 {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	req.Header = httphdr.FilterForUpstream(http.Header(clientHeader), cred.Forward...)
	if len(body) > 0 && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	cred.Apply(req.Header)
	return req, nil
}

// ParseUpstreamError reads an error answer; see openai.ParseError.
func ParseUpstreamError(status int, h http.Header, body []byte) *execution.UpstreamError {
	return oai.ParseError(status, h, body)
}

// ReadErrorBody reads at most 64 KiB of an error body.
func ReadErrorBody(r io.Reader) []byte {
	b, _ := io.ReadAll(io.LimitReader(r, 64<<10))
	return b
}

// Unreachable describes a failure to get any answer from the upstream:
// its cause class as the code (upstream_refused, upstream_dns,
// upstream_tls, upstream_timeout, upstream_reset, upstream_unreachable)
// and a message naming the class only — the client may see it, so never
// the upstream's address. The node logs the full error (Detail).
func Unreachable(err error) *execution.ExecutionFailure {
	cause := Cause(err)
	f := execution.UpstreamFailure(&execution.UpstreamError{Code: "upstream_" + cause,
		Message: "the provider's upstream could not be reached: " + causeText[cause]})
	f.Err = fmt.Errorf("%s", sanitizeErr(err))
	return f
}

var causeText = map[string]string{"refused": "connection refused", "dns": "its host name did not resolve",
	"tls": "the TLS handshake failed", "timeout": "the connection timed out", "reset": "the connection was reset",
	"unreachable": "the network failed"}

// Cause classifies a transport error: refused, dns, tls, timeout, reset
// or unreachable.
func Cause(err error) string {
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var recErr tls.RecordHeaderError
	var netErr net.Error
	msg := strings.ToLower(err.Error())
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.As(err, &dnsErr):
		return "dns"
	case errors.As(err, &certErr), errors.As(err, &recErr), strings.Contains(msg, "tls:"), strings.Contains(msg, "x509:"):
		return "tls"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "reset"
	case errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	}
	return "unreachable"
}

// sanitizeErr renders a transport error without the request URL, which
// may hold a credential in its query (Go's url.Error includes it).
func sanitizeErr(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Op + " upstream: " + ue.Err.Error()
	}
	return err.Error()
}
