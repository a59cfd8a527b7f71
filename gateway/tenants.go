package gateway

import (
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/execution"
)

// KeyLimits bound what one client key may use, on this edge (edges share
// no state: with N edges behind a balancer a key gets up to N times each
// limit; divide the limits by N, or route a key to one edge).
type KeyLimits struct {
	// RequestsPerMinute: a token bucket holding this many requests, refilled
	// continuously (a burst of N, then one every 60/N seconds).
	RequestsPerMinute int `koanf:"requests_per_minute" json:"requests_per_minute,omitempty"`
	// TokensPerMinute: prompt + completion tokens, the same kind of bucket;
	// a request is admitted while the bucket is not empty, reserving an
	// estimate of its prompt, and settled with the usage the upstream
	// reported.
	TokensPerMinute int64 `koanf:"tokens_per_minute" json:"tokens_per_minute,omitempty"`
	// Concurrent requests in flight.
	Concurrent int `koanf:"concurrent" json:"concurrent,omitempty"`
	// TokensPerDay and TokensPerMonth are budgets (UTC calendar day and
	// month); used up, requests get 429 insufficient_quota until the reset.
	TokensPerDay   int64 `koanf:"tokens_per_day" json:"tokens_per_day,omitempty"`
	TokensPerMonth int64 `koanf:"tokens_per_month" json:"tokens_per_month,omitempty"`
}

// bucket is a token bucket: capacity, refilled at capacity per minute.
type bucket struct {
	capacity float64
	level    float64
	last     time.Time
}

func newBucket(capacity float64, now time.Time) bucket {
	return bucket{capacity: capacity, level: capacity, last: now}
}

func (b *bucket) refill(now time.Time) {
	if b.capacity <= 0 {
		return
	}
	b.level = math.Min(b.capacity, b.level+now.Sub(b.last).Minutes()*b.capacity)
	b.last = now
}

// wait is how long until the bucket holds n again.
func (b *bucket) wait(n float64) time.Duration {
	if b.level >= n || b.capacity <= 0 {
		return 0
	}
	return time.Duration((n - b.level) / b.capacity * float64(time.Minute))
}

// full is how long until the bucket is full.
func (b *bucket) full() time.Duration { return b.wait(b.capacity) }

// window counts tokens in one calendar period.
type window struct {
	Start  time.Time `json:"start"`
	Tokens int64     `json:"tokens"`
}

func (w *window) roll(start time.Time) {
	if !w.Start.Equal(start) {
		w.Start, w.Tokens = start, 0
	}
}

// tenant is one key's state.
type tenant struct {
	cfg      KeyConfig
	requests bucket
	tokens   bucket
	inFlight int
	day      window
	month    window
	usage    keyUsage
}

// keyUsage is what a key used since the edge started (or since the usage
// file began).
type keyUsage struct {
	Requests         int64 `json:"requests"`
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	// EstimatedRequests and EstimatedTokens: the part of the above the
	// edge estimated because the upstream reported no usage.
	EstimatedRequests int64 `json:"estimated_requests"`
	EstimatedTokens   int64 `json:"estimated_tokens"`
}

// tenants enforces per-key limits and counts usage. Safe for concurrent
// use.
type tenants struct {
	now    func() time.Time
	shared *sharedLimits // nil: limits counted on this edge

	mu   sync.Mutex
	keys map[string]*tenant // by key id
}

func newTenants(keys []KeyConfig, now func() time.Time) *tenants {
	if now == nil {
		now = time.Now
	}
	t := &tenants{now: now, keys: map[string]*tenant{}}
	t.configure(keys)
	return t
}

// configure applies (re)loaded keys: a key kept keeps its state, a new
// one starts full, a removed one is forgotten.
func (t *tenants) configure(keys []KeyConfig) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	next := map[string]*tenant{}
	for _, k := range keys {
		tn := t.keys[k.ID]
		if tn == nil {
			tn = &tenant{}
		}
		if tn.cfg.Limits != k.Limits || tn.requests.last.IsZero() {
			tn.requests = newBucket(float64(k.Limits.RequestsPerMinute), now)
			tn.tokens = newBucket(float64(k.Limits.TokensPerMinute), now)
		}
		tn.cfg = k
		next[k.ID] = tn
	}
	t.keys = next
}

// admission is a request admitted for a key: end settles it.
type admission struct {
	t        *tenants
	key      string
	estimate int64
	header   http.Header
}

// admit checks key's limits for a request of model whose prompt is about
// estimate tokens. On success the caller must end the admission; on
// refusal the error is the client's 429 (or 403 for a model the key may
// not use). Either way the x-ratelimit headers are in header.
func (t *tenants) admit(key, model string, estimate int64, header http.Header) (*admission, *openai.Error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tn := t.keys[key]
	if tn == nil {
		return &admission{t: t, key: key}, nil // an open API, or a key without limits
	}
	if len(tn.cfg.Models) > 0 && !slices.ContainsFunc(tn.cfg.Models, func(m string) bool { return strings.EqualFold(m, model) }) {
		return nil, &openai.Error{Status: http.StatusForbidden, Type: openai.TypeInvalidRequest, Code: "model_not_allowed", Param: "model",
			Message: "This API key may not use the model '" + clipID(model) + "'."}
	}
	now := t.now()
	l := tn.cfg.Limits
	if t.shared != nil {
		return t.admitShared(tn, now, estimate, header)
	}
	tn.requests.refill(now)
	tn.tokens.refill(now)
	tn.day.roll(dayStart(now))
	tn.month.roll(monthStart(now))
	defer t.headers(tn, header)
	switch {
	case l.TokensPerDay > 0 && tn.day.Tokens >= l.TokensPerDay:
		return nil, budgetExhausted("daily", l.TokensPerDay, dayStart(now).AddDate(0, 0, 1).Sub(now), header)
	case l.TokensPerMonth > 0 && tn.month.Tokens >= l.TokensPerMonth:
		return nil, budgetExhausted("monthly", l.TokensPerMonth, monthStart(now).AddDate(0, 1, 0).Sub(now), header)
	case l.Concurrent > 0 && tn.inFlight >= l.Concurrent:
		return nil, rateLimited("requests", "concurrent requests", int64(l.Concurrent), time.Second, header)
	case l.RequestsPerMinute > 0 && tn.requests.level < 1:
		return nil, rateLimited("requests", "requests per minute (RPM)", int64(l.RequestsPerMinute), tn.requests.wait(1), header)
	case l.TokensPerMinute > 0 && tn.tokens.level <= 0:
		return nil, rateLimited("tokens", "tokens per minute (TPM)", l.TokensPerMinute, tn.tokens.wait(1), header)
	}
	if l.RequestsPerMinute > 0 {
		tn.requests.level--
	}
	if l.TokensPerMinute > 0 {
		tn.tokens.level -= float64(estimate)
	}
	tn.inFlight++
	return &admission{t: t, key: key, estimate: estimate, header: header}, nil
}

// admitShared admits a request of tn against the shared store; t.mu is
// held on entry and exit (not across the store's round trip).
func (t *tenants) admitShared(tn *tenant, now time.Time, estimate int64, header http.Header) (*admission, *openai.Error) {
	l := tn.cfg.Limits
	if l.Concurrent > 0 && tn.inFlight >= l.Concurrent { // concurrency stays per edge
		return nil, rateLimited("requests", "concurrent requests", int64(l.Concurrent), time.Second, header)
	}
	tn.inFlight++ // held while the store answers, so concurrency cannot overshoot
	t.mu.Unlock()
	e := t.shared.admit(tn.cfg.ID, l, now, header)
	t.mu.Lock()
	if e != nil {
		tn.inFlight--
		return nil, e
	}
	return &admission{t: t, key: tn.cfg.ID, estimate: estimate, header: header}, nil
}

// end settles an admitted request with its usage: as the upstream
// reported it, or the runtime's estimate of what was delivered
// (estimated); nil when nothing is charged (no answer reached the
// client): the prompt estimate then stands for the rate limit and
// nothing counts toward budgets.
func (a *admission) end(u *execution.TokenUsage, estimated bool) {
	t := a.t
	t.mu.Lock()
	defer t.mu.Unlock()
	tn := t.keys[a.key]
	if tn == nil {
		return
	}
	tn.inFlight = max(0, tn.inFlight-1)
	tn.usage.Requests++
	if u == nil {
		return
	}
	used := u.PromptTokens + u.CompletionTokens
	if t.shared != nil {
		go t.shared.settle(a.key, used, t.now()) // off the request's path
	}
	if tn.cfg.Limits.TokensPerMinute > 0 {
		tn.tokens.level -= float64(used - a.estimate)
	}
	tn.day.Tokens += used
	tn.month.Tokens += used
	tn.usage.PromptTokens += u.PromptTokens
	tn.usage.CompletionTokens += u.CompletionTokens
	if estimated {
		tn.usage.EstimatedRequests++
		tn.usage.EstimatedTokens += used
	}
}

// headers sets OpenAI's x-ratelimit headers for tn's limits.
func (t *tenants) headers(tn *tenant, h http.Header) {
	if h == nil {
		return
	}
	setRateHeaders(h, tn.cfg.Limits, int64(tn.requests.level), int64(tn.tokens.level), tn.requests.full(), tn.tokens.full())
}

// setRateHeaders sets OpenAI's x-ratelimit headers for the limits l sets.
func setRateHeaders(h http.Header, l KeyLimits, requestsLeft, tokensLeft int64, requestsReset, tokensReset time.Duration) {
	if l.RequestsPerMinute > 0 {
		h.Set("X-Ratelimit-Limit-Requests", strconv.Itoa(l.RequestsPerMinute))
		h.Set("X-Ratelimit-Remaining-Requests", strconv.FormatInt(max(0, requestsLeft), 10))
		h.Set("X-Ratelimit-Reset-Requests", resetString(requestsReset))
	}
	if l.TokensPerMinute > 0 {
		h.Set("X-Ratelimit-Limit-Tokens", strconv.FormatInt(l.TokensPerMinute, 10))
		h.Set("X-Ratelimit-Remaining-Tokens", strconv.FormatInt(max(0, tokensLeft), 10))
		h.Set("X-Ratelimit-Reset-Tokens", resetString(tokensReset))
	}
}

// resetString renders a reset delay as OpenAI does ("1s", "6m0s", "120ms").
func resetString(d time.Duration) string {
	if d < time.Second {
		return strconv.FormatInt(max(0, d.Milliseconds()), 10) + "ms"
	}
	return d.Round(time.Second).String()
}

func rateLimited(typ, what string, limit int64, wait time.Duration, h http.Header) *openai.Error {
	setRetryAfter(h, wait)
	return &openai.Error{Status: http.StatusTooManyRequests, Type: typ, Code: "rate_limit_exceeded",
		Message: "Rate limit reached for this API key on " + what + ": limit " + strconv.FormatInt(limit, 10) +
			". Please try again in " + resetString(wait) + "."}
}

func budgetExhausted(period string, budget int64, reset time.Duration, h http.Header) *openai.Error {
	setRetryAfter(h, reset)
	return &openai.Error{Status: http.StatusTooManyRequests, Type: "insufficient_quota", Code: "insufficient_quota",
		Message: "This API key's " + period + " token budget (" + strconv.FormatInt(budget, 10) + ") is used up; it resets in " +
			resetString(reset) + " (UTC)."}
}

func setRetryAfter(h http.Header, d time.Duration) {
	if h == nil {
		return
	}
	h.Set("Retry-After", strconv.FormatInt(max(1, int64(math.Ceil(d.Seconds()))), 10))
	h.Set("Retry-After-Ms", strconv.FormatInt(max(1, d.Milliseconds()), 10))
}

func dayStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

func monthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}
