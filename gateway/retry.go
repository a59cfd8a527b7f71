package gateway

import (
	"strings"
	"time"

	"github.com/iopgw/iop/streamgate"
)

// RetryConfig is a retry policy as configured: gateway-wide under
// `retry:`, per model under `models[].retry:`. An unset field inherits
// (model ← gateway ← streamgate.DefaultRetryPolicy).
type RetryConfig struct {
	// Retries on the model after its first attempt; default 2.
	Retries *int `koanf:"retries"`
	// RetryOn lists the failure classes retried on the model: 429, 5xx,
	// connect, stall, first_token_timeout (default all five).
	RetryOn []string `koanf:"retry_on"`
	// BackoffBase and BackoffMax: the jittered exponential wait before a
	// retry on the same provider; defaults 500ms and 8s.
	BackoffBase *time.Duration `koanf:"backoff_base"`
	BackoffMax  *time.Duration `koanf:"backoff_max"`
	// MaxRetryAfter: the longest upstream Retry-After waited for; default 10s.
	MaxRetryAfter *time.Duration `koanf:"max_retry_after"`
	// FirstTokenTimeout: no output this long after an attempt starts ends
	// it as a retryable failure; default 0 (off).
	FirstTokenTimeout *time.Duration `koanf:"first_token_timeout"`
	// FallbackOnContentPolicy: a content-policy refusal moves to the next
	// fallback model instead of being answered; default false.
	FallbackOnContentPolicy *bool `koanf:"fallback_on_content_policy"`
	// Resume: continue a committed text stream that was cut or stalled (on
	// a provider that accepts an assistant prefill, else by a verified
	// splice of a regeneration); default false.
	Resume *bool `koanf:"resume"`
	// ResumeSplice: with resume on, a stream no prefill can continue is
	// regenerated and spliced once the regeneration reproduced the
	// delivered text byte for byte; default true.
	ResumeSplice *bool `koanf:"resume_splice"`
}

// apply overlays the fields r sets onto p.
func (r RetryConfig) apply(p streamgate.RetryPolicy) streamgate.RetryPolicy {
	if r.Retries != nil {
		p.Retries = *r.Retries
	}
	if r.RetryOn != nil {
		p.RetryOn, _ = streamgate.ParseRetryOn(r.RetryOn) // validated at load
	}
	set := func(dst *time.Duration, v *time.Duration) {
		if v != nil {
			*dst = *v
		}
	}
	set(&p.BackoffBase, r.BackoffBase)
	set(&p.BackoffMax, r.BackoffMax)
	set(&p.MaxRetryAfter, r.MaxRetryAfter)
	set(&p.FirstTokenTimeout, r.FirstTokenTimeout)
	if r.FallbackOnContentPolicy != nil {
		p.FallbackOnContentPolicy = *r.FallbackOnContentPolicy
	}
	if r.Resume != nil {
		p.Resume = *r.Resume
	}
	if r.ResumeSplice != nil {
		p.NoSplice = !*r.ResumeSplice
	}
	return p
}

// validate records r's mistakes, naming each key under prefix.
func (r RetryConfig) validate(prefix string, bad badFunc) {
	if r.Retries != nil && (*r.Retries < 0 || *r.Retries > 10) {
		bad(prefix+".retries", "must be between 0 and 10")
	}
	if _, err := streamgate.ParseRetryOn(r.RetryOn); err != nil {
		bad(prefix+".retry_on", "%v", err)
	}
	for key, d := range map[string]*time.Duration{"backoff_base": r.BackoffBase, "backoff_max": r.BackoffMax,
		"max_retry_after": r.MaxRetryAfter, "first_token_timeout": r.FirstTokenTimeout} {
		if d != nil && *d < 0 {
			bad(prefix+"."+key, "must not be negative")
		}
	}
}

// RetryPolicy is the effective retry policy of model: from the table
// resolvePolicies built when the configuration was taken into use, else
// computed.
func (c *Config) RetryPolicy(model string) streamgate.RetryPolicy {
	if t := c.policies; t != nil {
		if p, ok := t.models[strings.ToLower(model)]; ok {
			return p
		}
		return t.base
	}
	p := c.Retry.apply(streamgate.DefaultRetryPolicy())
	return c.model(model).Retry.apply(p)
}

// policyTable is every configured model's effective policy, resolved once
// per configuration (the request path only looks it up).
type policyTable struct {
	base   streamgate.RetryPolicy
	models map[string]streamgate.RetryPolicy // by lower-cased name
}

// resolvePolicies builds c's policy table; call it on a validated
// configuration before it serves.
func (c *Config) resolvePolicies() {
	t := &policyTable{base: c.Retry.apply(streamgate.DefaultRetryPolicy()), models: map[string]streamgate.RetryPolicy{}}
	for _, m := range c.Models {
		if _, dup := t.models[strings.ToLower(m.Name)]; !dup { // the first entry of a name wins, as in model()
			t.models[strings.ToLower(m.Name)] = m.Retry.apply(t.base)
		}
	}
	c.policies = t
}
