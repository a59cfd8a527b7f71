package streamgate

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// FailureClass is what kind of pre-commit failure an attempt had, as a
// retry policy names it.
type FailureClass uint8

// The failure classes a retry policy can retry on. The others are never
// retried on the same model.
const (
	ClassNone              FailureClass = iota // final: a 4xx the client must fix
	Class429                                   // the upstream answered 429
	Class5xx                                   // the upstream answered 5xx, or an error event of that class
	ClassConnect                               // refused, reset, unreachable or cut before a response
	ClassStall                                 // a confirmed pre-commit stall
	ClassFirstTokenTimeout                     // no first output within the model's first-token timeout
	ClassContextLength                         // context_length_exceeded: a fallback may have a larger window
	ClassContentPolicy                         // a content-policy refusal
)

var classNames = [...]string{"none", "429", "5xx", "connect", "stall", "first_token_timeout", "context_length", "content_policy"}

func (c FailureClass) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return fmt.Sprintf("FailureClass(%d)", c)
}

// RetryOn is a set of failure classes.
type RetryOn uint16

// Has reports whether c is in the set.
func (r RetryOn) Has(c FailureClass) bool { return r&(1<<c) != 0 }

// RetryOnOf returns the set of the named classes.
func RetryOnOf(cs ...FailureClass) RetryOn {
	var r RetryOn
	for _, c := range cs {
		r |= 1 << c
	}
	return r
}

// ParseRetryOn parses configuration names: 429, 5xx, connect, stall,
// first_token_timeout.
func ParseRetryOn(names []string) (RetryOn, error) {
	var r RetryOn
	for _, n := range names {
		c, ok := retryable[strings.ToLower(strings.TrimSpace(n))]
		if !ok {
			return 0, fmt.Errorf("unknown failure class %q (want 429, 5xx, connect, stall or first_token_timeout)", n)
		}
		r |= RetryOnOf(c)
	}
	return r, nil
}

var retryable = map[string]FailureClass{"429": Class429, "5xx": Class5xx, "connect": ClassConnect, "stall": ClassStall,
	"first_token_timeout": ClassFirstTokenTimeout}

// String lists the set's class names.
func (r RetryOn) String() string {
	var names []string
	for c := Class429; c <= ClassFirstTokenTimeout; c++ {
		if r.Has(c) {
			names = append(names, c.String())
		}
	}
	return strings.Join(names, ",")
}

// RetryPolicy is how one model's pre-commit failures are handled. Every
// retry and fallback also passes the contract's replay gate (uncommitted,
// uncancelled, side-effect free, snapshot-backed) and takes a slot of the
// request's attempt cap and of the shared budget.
type RetryPolicy struct {
	// Retries is how many times the model is tried again after its first
	// attempt before the request moves to the next fallback model. A retry
	// goes to a provider of the model not yet failed in this request, and
	// to the same provider when it is the only one (after a stall only on
	// exact available evidence, and only when no fallback model is left).
	Retries int
	// RetryOn are the classes retried on the model; other failures go
	// straight to the next fallback (context length and, when enabled,
	// content policy) or to the client.
	RetryOn RetryOn
	// BackoffBase and BackoffMax shape the jittered exponential wait
	// before a retry on the same provider (another provider is tried at
	// once). A 429 without Retry-After waits at least twice the base.
	BackoffBase, BackoffMax time.Duration
	// MaxRetryAfter is the longest upstream Retry-After waited for; a
	// longer one moves the request on (another provider, the fallback) or,
	// with nowhere to go, is passed to the client.
	MaxRetryAfter time.Duration
	// FirstTokenTimeout, when positive, ends an attempt that has produced
	// no output this long after it started (before commit), as a
	// first_token_timeout failure.
	FirstTokenTimeout time.Duration
	// FallbackOnContentPolicy moves a content-policy refusal to the next
	// fallback model instead of answering it; off by default.
	FallbackOnContentPolicy bool
	// Resume continues a committed text stream that was cut or stalled:
	// on a provider that accepts an assistant prefill, else by splicing a
	// regeneration that reproduces the delivered text (see resume.go);
	// off by default.
	Resume bool
	// NoSplice turns the splice rung of resuming off: only a prefill
	// continues a cut stream.
	NoSplice bool
}

// DefaultRetryPolicy is the policy of a model nothing configures: two
// retries on 429, 5xx, connect and stall (as the official OpenAI SDKs
// retry), 500 ms doubling to 8 s, Retry-After honoured up to 10 s.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{Retries: 2, RetryOn: RetryOnOf(Class429, Class5xx, ClassConnect, ClassStall, ClassFirstTokenTimeout),
		BackoffBase: 500 * time.Millisecond, BackoffMax: 8 * time.Second, MaxRetryAfter: 10 * time.Second}
}

// backoff is the jittered wait before the n-th (1-based) retry on the
// same provider: base × 2^(n-1), capped, minus up to a quarter (jitter,
// as the OpenAI SDKs do).
func (p RetryPolicy) backoff(n int, class FailureClass) time.Duration {
	base := p.BackoffBase
	if class == Class429 {
		base *= 2
	}
	d := base << max(0, n-1)
	if d > p.BackoffMax || d <= 0 {
		d = p.BackoffMax
	}
	return time.Duration(float64(d) * (1 - rand.Float64()/4))
}
