// Package httphdr decides which HTTP headers cross iop. Hop-by-hop headers
// never do (RFC 9110 §7.6.1, as net/http/httputil.ReverseProxy); client
// credentials never reach a provider — a provider sees exactly one
// Authorization, the node's.
package httphdr

import (
	"net/http"
	"net/textproto"
	"slices"
	"strings"
)

// hopByHop are the headers a proxy must not forward.
var hopByHop = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// credentials are request headers that carry the client's identity or
// secrets; they stay at the edge.
var credentials = []string{"Authorization", "Cookie", "Api-Key", "X-Api-Key", "Openai-Api-Key"}

// CredentialScoped are request headers that choose which account a
// provider's credential acts for (or carry another vendor's key); a
// client must not pick the organization the node's key bills. A provider
// may forward named ones (its forward_headers setting).
var CredentialScoped = []string{"Openai-Organization", "Openai-Project", "X-Goog-Api-Key", "X-Auth-Token", "Anthropic-Api-Key", "X-Goog-User-Project"}

// Propagated are the client request headers carried on every path, the
// translated one included: trace context, the client's request id, and
// the OpenAI request headers that change how the upstream treats the
// request.
var Propagated = []string{"Traceparent", "Tracestate", "X-Request-Id", "Openai-Beta", "Idempotency-Key"}

// edgeOnly are request headers the edge owns or the transport recomputes.
var edgeOnly = []string{"Host", "Content-Length", "Accept-Encoding", "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip"}

// The names the filters drop, canonical, each with why.
const (
	dropAlways        = 1 + iota // hop-by-hop, a credential, or the edge's own
	dropUnlessAllowed            // credential-scoped: dropped unless allowed
)

var upstreamDrops = marked(marked(map[string]int{}, dropAlways, hopByHop, credentials, edgeOnly), dropUnlessAllowed, CredentialScoped)

// marked sets class for every name of lists in m, and returns m.
func marked(m map[string]int, class int, lists ...[]string) map[string]int {
	for _, list := range lists {
		for _, k := range list {
			m[k] = class
		}
	}
	return m
}

// upstreamFilter decides, header by header, what ForUpstream keeps: one
// look-up a header the client sent, instead of one a name the lists hold.
type upstreamFilter struct {
	allow  []string
	listed []string // the names Connection lists, canonical: more hop-by-hop headers
}

func newUpstreamFilter(h http.Header, allow []string) upstreamFilter {
	return upstreamFilter{allow: allow, listed: connectionListed(h)}
}

// connectionListed returns the names h's Connection header lists, in
// their canonical form (as Header.Del would find them); nil for none.
func connectionListed(h http.Header) []string {
	var names []string
	for _, v := range h["Connection"] {
		for name := range strings.SplitSeq(v, ",") {
			if name = textproto.TrimString(name); name != "" {
				names = append(names, textproto.CanonicalMIMEHeaderKey(name))
			}
		}
	}
	return names
}

func (f upstreamFilter) keeps(k string) bool {
	switch upstreamDrops[k] {
	case dropAlways:
		return false
	case dropUnlessAllowed:
		if !containsFold(f.allow, k) {
			return false
		}
	}
	return !slices.Contains(f.listed, k)
}

// ForUpstream returns a copy of a client's request headers that may be
// carried to a provider: end-to-end headers such as Content-Type, Accept,
// OpenAI-Beta, X-Stainless-* and custom ones, with hop-by-hop headers,
// credentials, credential-scoped headers (OpenAI-Organization,
// OpenAI-Project, other vendors' key headers) unless named in allow, Host,
// Content-Length, Accept-Encoding and X-Forwarded-* removed. What it
// keeps is copied as Header.Clone copies: the values in one slice.
func ForUpstream(in http.Header, allow ...string) http.Header {
	if in == nil {
		return http.Header{}
	}
	f := newUpstreamFilter(in, allow)
	keys, values := 0, 0
	for k, vs := range in {
		if f.keeps(k) {
			keys, values = keys+1, values+len(vs)
		}
	}
	out := make(http.Header, keys)
	all := make([]string, values)
	for k, vs := range in {
		if f.keeps(k) {
			n := copy(all, vs)
			out[k], all = all[:n:n], all[n:]
		}
	}
	return out
}

// FilterForUpstream is ForUpstream in place: it removes from h, which
// the caller owns, what ForUpstream would not copy, and returns it (an
// empty header for nil).
func FilterForUpstream(h http.Header, allow ...string) http.Header {
	if h == nil {
		return http.Header{}
	}
	f := newUpstreamFilter(h, allow)
	for k := range h {
		if !f.keeps(k) {
			delete(h, k)
		}
	}
	return h
}

// Propagate returns the Propagated headers of a client request, for the
// translated path (nil when there are none).
func Propagate(in http.Header) map[string][]string {
	var out map[string][]string
	for _, k := range Propagated {
		if v := in[k]; len(v) > 0 { // canonical, as net/http stores a request's keys
			if out == nil {
				out = map[string][]string{}
			}
			out[k] = append([]string(nil), v...)
		}
	}
	return out
}

// fromNode are response headers a node may not set on a client's
// response: the edge owns framing (Content-Length, Transfer-Encoding,
// Content-Encoding: the node's transport already decoded the body) and
// never lets a provider set cookies, redirect, or name its server.
var fromNode = []string{"Content-Length", "Content-Encoding", "Set-Cookie", "Set-Cookie2", "Location", "Server", "Alt-Svc", "Strict-Transport-Security"}

// ForClient filters the headers of a node-relayed upstream response to
// what may reach the client: what FromUpstream keeps, minus the headers
// the edge owns or never takes from a node. It works in place, on a map
// the caller owns (each frame decoded from the link is a fresh one), and
// returns it (an empty map for nil).
func ForClient(h http.Header) http.Header {
	return dropFromUpstream(h, true)
}

func containsFold(list []string, k string) bool {
	for _, v := range list {
		if strings.EqualFold(v, k) {
			return true
		}
	}
	return false
}

// FromUpstream removes hop-by-hop headers from a provider's response
// headers, for the client. It works in place, on a map the caller owns
// (an upstream response's, which nothing reads after), and returns it (an
// empty map for nil).
func FromUpstream(h http.Header) http.Header {
	return dropFromUpstream(h, false)
}

// responseDrops are the response headers FromUpstream drops (hop) and
// those ForClient drops besides (node).
var responseDrops = marked(marked(map[string]int{}, dropFromNode, fromNode), dropHop, hopByHop)

const (
	dropHop = 1 + iota
	dropFromNode
)

// dropFromUpstream drops from h, in place, the hop-by-hop headers (and
// those Connection names), and with fromNodes those of fromNode too.
func dropFromUpstream(h http.Header, fromNodes bool) http.Header {
	if h == nil {
		return http.Header{}
	}
	listed := connectionListed(h)
	for k := range h {
		switch d := responseDrops[k]; {
		case d == dropHop, d == dropFromNode && fromNodes, slices.Contains(listed, k):
			delete(h, k)
		}
	}
	return h
}

// Size is the size of r's request line and headers as sent.
func Size(r *http.Request) int {
	n := len(r.Method) + len(r.RequestURI) + len(r.Proto) + 4
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}
