package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
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
	rdb     *redis.Client
	cfg     LimitStoreConfig
	onError func(error) // counts and logs a store failure
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

// admitScript checks the budgets and the token window, then takes one
// request from the request window. It returns {verdict, requests used,
// tokens used}: 0 admitted, 1 requests, 2 tokens, 3 day budget, 4 month
// budget.
var admitScript = redis.NewScript(`
local function get(k) return tonumber(redis.call('GET', k) or '0') end
local rpm, tpm, dayb, monthb = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if dayb > 0 and get(KEYS[3]) >= dayb then return {3, 0, 0} end
if monthb > 0 and get(KEYS[4]) >= monthb then return {4, 0, 0} end
local tok = get(KEYS[2])
if tpm > 0 and tok >= tpm then return {2, 0, tok} end
local n = 0
if rpm > 0 then
  n = get(KEYS[1])
  if n >= rpm then return {1, n, tok} end
  n = redis.call('INCR', KEYS[1])
  if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[5]) end
end
return {0, n, tok}
`)

// settleScript adds tokens to the token window and the budgets.
var settleScript = redis.NewScript(`
for i = 1, 3 do
  local v = redis.call('INCRBY', KEYS[i], ARGV[1])
  if v == tonumber(ARGV[1]) then redis.call('PEXPIRE', KEYS[i], ARGV[i + 1]) end
end
return 1
`)

func (s *sharedLimits) keys(key string, now time.Time) []string {
	w := now.Truncate(s.cfg.Window).Unix()
	p := "iop:limits:" + key + ":"
	return []string{p + "req:" + strconv.FormatInt(w, 10), p + "tok:" + strconv.FormatInt(w, 10),
		p + "day:" + dayStart(now).Format("20060102"), p + "month:" + monthStart(now).Format("200601")}
}

// admit applies l's shared limits to one request of key. A store failure
// is nil (fail open) or a 503 (fail closed).
func (s *sharedLimits) admit(key string, l KeyLimits, now time.Time, h http.Header) *openai.Error {
	if l.RequestsPerMinute <= 0 && l.TokensPerMinute <= 0 && l.TokensPerDay <= 0 && l.TokensPerMonth <= 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	defer cancel()
	windowLeft := now.Truncate(s.cfg.Window).Add(s.cfg.Window).Sub(now)
	res, err := admitScript.Run(ctx, s.rdb, s.keys(key, now), l.RequestsPerMinute, l.TokensPerMinute, l.TokensPerDay, l.TokensPerMonth,
		(s.cfg.Window + time.Second).Milliseconds()).Int64Slice()
	if err != nil || len(res) != 3 {
		return s.failed(fmt.Errorf("admission: %w", errors.Join(err, errShape(res))))
	}
	setRateHeaders(h, l, int64(l.RequestsPerMinute)-res[1], l.TokensPerMinute-res[2], windowLeft, windowLeft)
	switch res[0] {
	case 1:
		return rateLimited("requests", "requests per minute (RPM)", int64(l.RequestsPerMinute), windowLeft, h)
	case 2:
		return rateLimited("tokens", "tokens per minute (TPM)", l.TokensPerMinute, windowLeft, h)
	case 3:
		return budgetExhausted("daily", l.TokensPerDay, dayStart(now).AddDate(0, 0, 1).Sub(now), h)
	case 4:
		return budgetExhausted("monthly", l.TokensPerMonth, monthStart(now).AddDate(0, 1, 0).Sub(now), h)
	}
	return nil
}

// settle adds the tokens a request used.
func (s *sharedLimits) settle(key string, tokens int64, now time.Time) {
	if tokens <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	defer cancel()
	k := s.keys(key, now)
	err := settleScript.Run(ctx, s.rdb, k[1:], tokens, (s.cfg.Window + time.Second).Milliseconds(),
		(49 * time.Hour).Milliseconds(), (32 * 24 * time.Hour).Milliseconds()).Err()
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
