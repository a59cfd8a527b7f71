package tenancy

import "sort"

// KeyStatus is one client key's use and limits, for /admin/keys and the
// status page. Never the key itself.
type KeyStatus struct {
	ID       string    `json:"id"`
	Limits   KeyLimits `json:"limits"`
	Models   []string  `json:"models,omitempty"`
	InFlight int       `json:"in_flight"`
	Usage    KeyUsage  `json:"usage"`
	// Today and Month are the budget windows (UTC), with what remains when
	// a budget is set.
	Today          Window `json:"today"`
	Month          Window `json:"month"`
	RemainingDay   *int64 `json:"remaining_tokens_today,omitempty"`
	RemainingMonth *int64 `json:"remaining_tokens_month,omitempty"`
	// RemainingRequests and RemainingTokens are the rate buckets' levels.
	RemainingRequests *int64 `json:"remaining_requests,omitempty"`
	RemainingTokens   *int64 `json:"remaining_tokens,omitempty"`
}

// Status lists every configured key.
func (t *Tenants) Status() []KeyStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	out := make([]KeyStatus, 0, len(t.keys))
	for id, tn := range t.keys {
		if !tn.present {
			continue // removed by a reload: its usage is kept, not shown
		}
		tn.requests.refill(now)
		tn.tokens.refill(now)
		tn.day.roll(dayStart(now))
		tn.month.roll(monthStart(now))
		l := tn.cfg.Limits
		s := KeyStatus{ID: id, Limits: l, Models: tn.cfg.Models, InFlight: tn.inFlight, Usage: tn.usage, Today: tn.day, Month: tn.month}
		if l.TokensPerDay > 0 {
			s.RemainingDay = ptr(max(0, l.TokensPerDay-tn.day.Tokens))
		}
		if l.TokensPerMonth > 0 {
			s.RemainingMonth = ptr(max(0, l.TokensPerMonth-tn.month.Tokens))
		}
		if l.RequestsPerMinute > 0 {
			s.RemainingRequests = ptr(max(0, int64(tn.requests.level)))
		}
		if l.TokensPerMinute > 0 {
			s.RemainingTokens = ptr(max(0, int64(tn.tokens.level)))
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func ptr[T any](v T) *T { return &v }
