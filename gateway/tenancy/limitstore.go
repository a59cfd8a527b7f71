package tenancy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iopgw/iop/codec/openai"
)

// LimitStoreConfig shares per-key rate windows and budgets among edges.
type LimitStoreConfig struct {
	// Redis is the address (host:port) of the Redis that holds the
	// counters; empty keeps them per edge.
	Redis string `koanf:"redis"`
	// PasswordEnv names the environment variable holding Redis's password.
	PasswordEnv string `koanf:"password_env"`
	// DB is the Redis database number.
	DB int `koanf:"db"`
	// Timeout bounds each Redis call; default 100ms.
	Timeout time.Duration `koanf:"timeout"`
	// Failure is what a request gets when Redis does not answer in time:
	// open (default: admitted, counted in iop_edge_limit_store_errors_total
	// and logged) or closed (503).
	Failure string `koanf:"failure"`
	// Window is the length of the fixed rate windows (requests and tokens
	// per minute are counted per clock-aligned window); default 1m.
	Window time.Duration `koanf:"window"`
}

// sharedLimits counts rate windows and budgets in Redis, atomically (one
// Lua script per admission, one per settlement), so every edge sees the
// same counts. Windows are fixed and aligned to the clock: a limit of N
// per minute hands out exactly N in each minute across all edges.
type sharedLimits struct {
	rdb      *redis.Client
	cfg      LimitStoreConfig
	onError  func(error)    // counts and logs a store failure
	settling sync.WaitGroup // settlements in flight (off the request path); Close waits for them
}

// settleAsync settles off the request's path; Close waits for it.
func (s *sharedLimits) settleAsync(key string, reserve, used int64, at time.Time) {
	s.settling.Go(func() { s.settle(key, reserve, used, at) })
}

// Close waits for settlements in flight (each bounded by the store
// timeout) and closes the Redis client.
func (s *sharedLimits) Close() error {
	s.settling.Wait()
	return s.rdb.Close()
}

// quietRedis drops go-redis's own log lines: a store failure is logged
// (sampled) and counted by the gateway.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

func newSharedLimits(cfg LimitStoreConfig, password string, onError func(error)) *sharedLimits {
	redis.SetLogger(quietRedis{})
	if cfg.Timeout <= 0 {
		cfg.Timeout = 100 * time.Millisecond
	}
	if cfg.Window <= 0 {
		cfg.Window = time.Minute
	}
	return &sharedLimits{cfg: cfg, onError: onError, rdb: redis.NewClient(&redis.Options{Addr: cfg.Redis, Password: password, DB: cfg.DB,
		DialTimeout: cfg.Timeout, ReadTimeout: cfg.Timeout, WriteTimeout: cfg.Timeout, MaxRetries: -1})}
}

// admitScript checks the budgets and the token window against the
// request's reservation, takes one request from the request window and,
// admitted, adds the reservation to the token window, the budgets and the
// key's in-flight reservations (settleScript replaces it with what was
// used). A reservation fits what is left, or is alone (nothing else in
// flight) with something left. It returns {verdict, requests used,
// tokens used}: 0 admitted, 1 requests, 2 tokens, 3 day budget, 4 month
// budget, 5 day or month budget reserved by requests in flight.
var admitScript = redis.NewScript(`
local function get(k) return tonumber(redis.call('GET', k) or '0') end
local rpm, tpm, dayb, monthb, res = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[6])
local alone = get(KEYS[5]) <= 0
local function fits(taken, limit) return limit <= 0 or taken + res <= limit or (alone and taken < limit) end
local day, month, tok = get(KEYS[3]), get(KEYS[4]), get(KEYS[2])
if dayb > 0 and day >= dayb then return {3, 0, tok} end
if monthb > 0 and month >= monthb then return {4, 0, tok} end
if not fits(day, dayb) or not fits(month, monthb) then return {5, 0, tok} end
if tpm > 0 and (tok >= tpm or not fits(tok, tpm)) then return {2, 0, tok} end
local n = 0
if rpm > 0 then
  n = get(KEYS[1])
  if n >= rpm then return {1, n, tok} end
  n = redis.call('INCR', KEYS[1])
  if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[5]) end
end
if res > 0 then
  for i = 2, 5 do
    local v = redis.call('INCRBY', KEYS[i], res)
    if v == res then redis.call('PEXPIRE', KEYS[i], ARGV[i + 5]) end
  end
  if redis.call('PTTL', KEYS[5]) < tonumber(ARGV[10]) then redis.call('PEXPIRE', KEYS[5], ARGV[10]) end
end
return {0, n, tok + res}
`)

// settleScript replaces a request's reservation (ARGV[2]) by the tokens it
// used (ARGV[1]) in the windows of its admission, and releases it from the
// key's in-flight reservations.
var settleScript = redis.NewScript(`
local used, res = tonumber(ARGV[1]), tonumber(ARGV[2])
local d = used - res
for i = 1, 3 do
  if d ~= 0 then
    local v = redis.call('INCRBY', KEYS[i], d)
    if v == d then redis.call('PEXPIRE', KEYS[i], ARGV[i + 2]) end
  end
end
if res > 0 and redis.call('DECRBY', KEYS[4], res) <= 0 then redis.call('DEL', KEYS[4]) end
return 1
`)

// The shared counters' lifetimes: a token window outlives its window by a
// second; day and month budgets their period with a margin; the in-flight
// reservations of a key an hour past its last admission (an edge that
// died with requests in flight leaks its reservations that long).
const (
	dayTTL        = 49 * time.Hour
	monthTTL      = 32 * 24 * time.Hour
	reservedTTL   = time.Hour
	reservedKeyID = "reserved"
)

func (s *sharedLimits) keys(key string, now time.Time) []string {
	w := now.Truncate(s.cfg.Window).Unix()
	p := "iop:limits:" + key + ":"
	return []string{p + "req:" + strconv.FormatInt(w, 10), p + "tok:" + strconv.FormatInt(w, 10),
		p + "day:" + dayStart(now).Format("20060102"), p + "month:" + monthStart(now).Format("200601"), p + reservedKeyID}
}

// admit applies l's shared limits to one request of key. A store failure
// is nil (fail open) or a 503 (fail closed).
//
// reserved reports whether the store holds the request's reservation
// (admitted by the store, not failed open), for settle.
func (s *sharedLimits) admit(key string, l KeyLimits, now time.Time, reserve int64, h http.Header) (reserved bool, e *openai.Error) {
	if !l.counted() {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	defer cancel()
	windowLeft := now.Truncate(s.cfg.Window).Add(s.cfg.Window).Sub(now)
	window := (s.cfg.Window + time.Second).Milliseconds()
	res, err := admitScript.Run(ctx, s.rdb, s.keys(key, now), l.RequestsPerMinute, l.TokensPerMinute, l.TokensPerDay, l.TokensPerMonth,
		window, reserve, window, dayTTL.Milliseconds(), monthTTL.Milliseconds(), reservedTTL.Milliseconds()).Int64Slice()
	if err != nil || len(res) != 3 {
		return false, s.failed(fmt.Errorf("admission: %w", errors.Join(err, errShape(res))))
	}
	setRateHeaders(h, l, int64(l.RequestsPerMinute)-res[1], l.TokensPerMinute-res[2], windowLeft, windowLeft)
	switch res[0] {
	case 1:
		return false, rateLimited("requests", "requests per minute (RPM)", int64(l.RequestsPerMinute), windowLeft, h)
	case 2:
		return false, rateLimited("tokens", "tokens per minute (TPM)", l.TokensPerMinute, windowLeft, h)
	case 3:
		return false, budgetExhausted("daily", l.TokensPerDay, dayStart(now).AddDate(0, 0, 1).Sub(now), h)
	case 4:
		return false, budgetExhausted("monthly", l.TokensPerMonth, monthStart(now).AddDate(0, 1, 0).Sub(now), h)
	case 5:
		return false, budgetReserved("daily or monthly", max(l.TokensPerDay, l.TokensPerMonth), h)
	}
	return true, nil
}

// counted reports whether any of l's limits is counted in the store.
func (l KeyLimits) counted() bool {
	return l.RequestsPerMinute > 0 || l.TokensPerMinute > 0 || l.TokensPerDay > 0 || l.TokensPerMonth > 0
}

// settle replaces an admitted request's reservation with the tokens it
// used, in the windows of its admission.
func (s *sharedLimits) settle(key string, reserve, used int64, at time.Time) {
	if reserve == 0 && used == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	defer cancel()
	k := s.keys(key, at)
	err := settleScript.Run(ctx, s.rdb, k[1:], used, reserve, (s.cfg.Window + time.Second).Milliseconds(),
		dayTTL.Milliseconds(), monthTTL.Milliseconds()).Err()
	if err != nil {
		s.onError(fmt.Errorf("settlement: %w", err))
	}
}

// failed applies the failure policy to a store error.
func (s *sharedLimits) failed(err error) *openai.Error {
	s.onError(err)
	if s.cfg.Failure == "closed" {
		return &openai.Error{Status: http.StatusServiceUnavailable, Type: openai.TypeServiceUnavailable, Code: "limits_unavailable",
			Message: "The gateway cannot check this key's limits right now. Please retry."}
	}
	return nil
}

func errShape(res []int64) error {
	if len(res) == 3 {
		return nil
	}
	return fmt.Errorf("unexpected answer %v", res)
}

// UseSharedStore counts t's rate windows and budgets in the Redis cfg
// names (every edge sharing it sees the same counts); onError is told of
// every failed call. Call it before t serves.
func (t *Tenants) UseSharedStore(cfg LimitStoreConfig, password string, onError func(error)) {
	t.shared = newSharedLimits(cfg, password, onError)
}

// Close waits for settlements to the shared store still in flight and
// closes its client; nothing without one.
func (t *Tenants) Close() error {
	if t.shared == nil {
		return nil
	}
	return t.shared.Close()
}
