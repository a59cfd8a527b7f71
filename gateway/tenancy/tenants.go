package tenancy

import (
	"math"
	"net/http"
	"strconv"
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
type Window struct {
	Start  time.Time `json:"start"`
	Tokens int64     `json:"tokens"`
}

func (w *Window) roll(start time.Time) {
	if !w.Start.Equal(start) {
		w.Start, w.Tokens = start, 0
	}
}

// tenant is one key's state. It outlives the key's configuration: a key
// removed by a reload keeps its usage and budget windows (absent, every
// request refused), so putting it back restores them.
type tenant struct {
	cfg      KeyConfig
	present  bool // the key is in the running configuration
	requests bucket
	tokens   bucket
	inFlight int
	reserved int64 // tokens reserved by the key's admitted requests in flight
	day      Window
	month    Window
	usage    KeyUsage
}

// KeyUsage is what a key used since the edge started (or since the usage
// file began).
type KeyUsage struct {
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
type Tenants struct {
	now    func() time.Time
	shared *sharedLimits // nil: limits counted on this edge

	mu   sync.Mutex
	keys map[string]*tenant // by key id
}

func New(keys []KeyConfig, now func() time.Time) *Tenants {
	if now == nil {
		now = time.Now
	}
	t := &Tenants{now: now, keys: map[string]*tenant{}}
	t.Configure(keys)
	return t
}

// configure applies (re)loaded keys: a key kept keeps its state, a new
// one starts full, a removed one is kept absent (refused, its usage and
// windows remembered for when it comes back).
func (t *Tenants) Configure(keys []KeyConfig) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	for _, tn := range t.keys {
		tn.present = false
	}
	for _, k := range keys {
		tn := t.keys[k.ID]
		if tn == nil {
			tn = &tenant{}
			t.keys[k.ID] = tn
		}
		if tn.cfg.Limits != k.Limits || tn.requests.last.IsZero() {
			tn.requests = newBucket(float64(k.Limits.RequestsPerMinute), now)
			tn.tokens = newBucket(float64(k.Limits.TokensPerMinute), now)
		}
		tn.cfg, tn.present = k, true
	}
}

// allows reports whether key may use model: an open API (no key) and a
// key without a model list may use any.
func (t *Tenants) Allows(key, model string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	tn := t.keys[key]
	return key == "" || tn != nil && tn.present && tn.cfg.allows(model)
}

// admission is a request admitted for a key: end settles it.
type Admission struct {
	t       *Tenants
	key     string
	limits  KeyLimits // the key's limits at admission: it settles under them
	reserve int64     // tokens reserved at admission
	shared  int64     // of which the shared store holds (0 when it failed open)
	at      time.Time // when (the shared store's windows of the reservation)
	header  http.Header
}

// admit checks key's limits for a request of model that may use up to
// reserve tokens (its prompt estimate plus its output limit). Token
// limits — tokens per minute and the day and month budgets — admit a
// request only if its reservation fits beside what was used and what the
// key's requests in flight reserved; a request alone may take what is
// left even when its reservation is larger (a budget is never locked by
// a large max_tokens), so a burst overshoots a budget by at most one
// request's estimation error. On success the caller must end the
// admission; on refusal the error is the client's 429 (403 for a model
// the key may not use, 401 for a key no longer configured). Either way
// the x-ratelimit headers are in header.
func (t *Tenants) Admit(key, model string, reserve int64, header http.Header) (*Admission, *openai.Error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if key == "" {
		return &Admission{t: t}, nil // an open API
	}
	tn := t.keys[key]
	if tn == nil || !tn.present {
		return nil, RevokedKey()
	}
	if !tn.cfg.allows(model) {
		return nil, &openai.Error{Status: http.StatusForbidden, Type: openai.TypeInvalidRequest, Code: "model_not_allowed", Param: "model",
			Message: "This API key may not use the model '" + clip(model) + "'."}
	}
	now := t.now()
	if t.shared != nil {
		return t.admitShared(tn, now, reserve, header)
	}
	if e := t.admitLocal(tn, now, reserve, header); e != nil {
		return nil, e
	}
	tn.inFlight++
	tn.reserved += reserve
	return &Admission{t: t, key: key, limits: tn.cfg.Limits, reserve: reserve, at: now, header: header}, nil
}

// admitLocal applies tn's limits on this edge and takes what an admitted
// request takes from its buckets; t.mu is held.
func (t *Tenants) admitLocal(tn *tenant, now time.Time, reserve int64, header http.Header) *openai.Error {
	l := tn.cfg.Limits
	tn.requests.refill(now)
	tn.tokens.refill(now)
	tn.day.roll(dayStart(now))
	tn.month.roll(monthStart(now))
	defer t.headers(tn, header)
	alone := tn.reserved == 0
	switch {
	case l.TokensPerDay > 0 && tn.day.Tokens >= l.TokensPerDay:
		return budgetExhausted("daily", l.TokensPerDay, dayStart(now).AddDate(0, 0, 1).Sub(now), header)
	case l.TokensPerMonth > 0 && tn.month.Tokens >= l.TokensPerMonth:
		return budgetExhausted("monthly", l.TokensPerMonth, monthStart(now).AddDate(0, 1, 0).Sub(now), header)
	case !fits(tn.day.Tokens+tn.reserved, reserve, l.TokensPerDay, alone):
		return budgetReserved("daily", l.TokensPerDay, header)
	case !fits(tn.month.Tokens+tn.reserved, reserve, l.TokensPerMonth, alone):
		return budgetReserved("monthly", l.TokensPerMonth, header)
	case l.Concurrent > 0 && tn.inFlight >= l.Concurrent:
		return rateLimited("requests", "concurrent requests", int64(l.Concurrent), time.Second, header)
	case l.RequestsPerMinute > 0 && tn.requests.level < 1:
		return rateLimited("requests", "requests per minute (RPM)", int64(l.RequestsPerMinute), tn.requests.wait(1), header)
	case l.TokensPerMinute > 0 && (tn.tokens.level <= 0 || !fits(l.TokensPerMinute-int64(tn.tokens.level), reserve, l.TokensPerMinute, alone)):
		return rateLimited("tokens", "tokens per minute (TPM)", l.TokensPerMinute, tn.tokens.wait(float64(min(reserve, l.TokensPerMinute))), header)
	}
	if l.RequestsPerMinute > 0 {
		tn.requests.level--
	}
	if l.TokensPerMinute > 0 {
		tn.tokens.level -= float64(reserve)
	}
	return nil
}

// fits reports whether a reservation of reserve fits a limit of which
// taken (used plus reserved) is gone: it fits what is left, or the
// request is alone and something is left. A zero limit is no limit.
func fits(taken, reserve, limit int64, alone bool) bool {
	return limit <= 0 || taken+reserve <= limit || alone && taken < limit
}

// admitShared admits a request of tn against the shared store; t.mu is
// held on entry and exit (not across the store's round trip).
func (t *Tenants) admitShared(tn *tenant, now time.Time, reserve int64, header http.Header) (*Admission, *openai.Error) {
	l := tn.cfg.Limits
	if l.Concurrent > 0 && tn.inFlight >= l.Concurrent { // concurrency stays per edge
		return nil, rateLimited("requests", "concurrent requests", int64(l.Concurrent), time.Second, header)
	}
	tn.inFlight++ // held while the store answers, so concurrency cannot overshoot
	t.mu.Unlock()
	held, e := t.shared.admit(tn.cfg.ID, l, now, reserve, header)
	t.mu.Lock()
	if e != nil {
		tn.inFlight--
		return nil, e
	}
	a := &Admission{t: t, key: tn.cfg.ID, limits: l, reserve: reserve, at: now, header: header}
	if held {
		a.shared = reserve
	}
	return a, nil
}

// end settles an admitted request with its usage: as the upstream
// reported it, or the runtime's estimate of what was delivered
// (estimated); nil when nothing is charged (no answer reached the
// client). The reservation is released and replaced by what was used.
func (a *Admission) End(u *execution.TokenUsage, estimated bool) {
	t := a.t
	if a.key == "" {
		return
	}
	var used int64
	if u != nil {
		used = u.PromptTokens + u.CompletionTokens
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	tn := t.keys[a.key]
	tn.inFlight = max(0, tn.inFlight-1)
	tn.usage.Requests++
	if t.shared != nil {
		if a.shared > 0 || used > 0 && a.limits.counted() {
			t.shared.settleAsync(a.key, a.shared, used, a.at)
		}
	} else {
		tn.reserved = max(0, tn.reserved-a.reserve)
		if a.limits.TokensPerMinute > 0 && tn.cfg.Limits == a.limits { // a reload that changed the limits refilled the buckets
			tn.tokens.level = min(tn.tokens.capacity, tn.tokens.level+float64(a.reserve-used))
		}
	}
	if u == nil {
		return
	}
	tn.day.roll(dayStart(t.now()))
	tn.month.roll(monthStart(t.now()))
	tn.day.Tokens += used
	tn.month.Tokens += used
	tn.usage.PromptTokens += u.PromptTokens
	tn.usage.CompletionTokens += u.CompletionTokens
	if estimated {
		tn.usage.EstimatedRequests++
		tn.usage.EstimatedTokens += used
	}
}

// revokedKey is the answer to a request whose key a reload removed or
// changed after its headers were authenticated and before it was
// admitted.
func RevokedKey() *openai.Error {
	return &openai.Error{Status: http.StatusUnauthorized, Type: openai.TypeInvalidRequest, Code: "invalid_api_key",
		Message: "Incorrect API key provided: the key is no longer accepted."}
}

// headers sets OpenAI's x-ratelimit headers for tn's limits.
func (t *Tenants) headers(tn *tenant, h http.Header) {
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

// budgetReserved is the answer when a budget has tokens left but the
// key's requests in flight reserved them.
func budgetReserved(period string, budget int64, h http.Header) *openai.Error {
	setRetryAfter(h, time.Second)
	return &openai.Error{Status: http.StatusTooManyRequests, Type: "tokens", Code: "rate_limit_exceeded",
		Message: "This API key's " + period + " token budget (" + strconv.FormatInt(budget, 10) + ") is taken by its requests in flight " +
			"(each reserves its prompt and max_tokens); retry when they finish, or ask for fewer max_tokens."}
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

// clip bounds an identifier a client chose before it goes into a message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64]
	}
	return s
}
