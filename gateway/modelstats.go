package gateway

import (
	"sort"
	"sync"
	"time"

	"github.com/iopgw/iop/streamgate"
)

// ModelStats is what the failover policy did for one model since start:
// for the status page, /admin/providers and `iop status`.
type ModelStats struct {
	Model     string      `json:"model"`
	Requests  int64       `json:"requests"`
	Retries   int64       `json:"retries"`
	Fallbacks int64       `json:"fallbacks"`
	Resumes   int64       `json:"resumes"`
	Policy    ModelPolicy `json:"policy"`
}

// ModelPolicy is a model's effective retry policy, as the admin API shows it.
type ModelPolicy struct {
	Retries           int      `json:"retries"`
	RetryOn           string   `json:"retry_on"`
	FirstTokenTimeout string   `json:"first_token_timeout,omitempty"`
	Resume            bool     `json:"resume"`
	Fallbacks         []string `json:"fallbacks,omitempty"`
}

// maxModelStats bounds the models tracked (only configured or served
// models are, so the set is the operator's).
const maxModelStats = 1024

// modelStats counts requests, retries, fallbacks and resumes by the model
// the client asked for.
type modelStats struct {
	mu sync.Mutex
	m  map[string]*ModelStats
}

// record adds one request's summary, for a model known to the gateway.
func (s *modelStats) record(model string, sum streamgate.Summary) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]*ModelStats{}
	}
	st := s.m[model]
	if st == nil {
		if len(s.m) >= maxModelStats {
			return
		}
		st = &ModelStats{Model: model}
		s.m[model] = st
	}
	st.Requests++
	st.Retries += int64(sum.Retries)
	st.Fallbacks += int64(sum.Fallbacks)
	st.Resumes += int64(sum.Resumes)
}

// snapshot lists every configured or counted model with its policy.
func (s *modelStats) snapshot(cfg *Config) []ModelStats {
	s.mu.Lock()
	byName := map[string]ModelStats{}
	for k, v := range s.m {
		byName[k] = *v
	}
	s.mu.Unlock()
	for _, m := range cfg.Models {
		if _, ok := byName[m.Name]; !ok {
			byName[m.Name] = ModelStats{Model: m.Name}
		}
	}
	out := make([]ModelStats, 0, len(byName))
	for name, st := range byName {
		p := cfg.RetryPolicy(name)
		st.Policy = ModelPolicy{Retries: p.Retries, RetryOn: p.RetryOn.String(), Resume: p.Resume, Fallbacks: cfg.model(name).Fallbacks}
		if p.FirstTokenTimeout > 0 {
			st.Policy.FirstTokenTimeout = p.FirstTokenTimeout.Round(time.Millisecond).String()
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Model < out[j].Model })
	return out
}
