package ratelimit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
)

// Bounds of a Spec (a limit outside them is a typo, not a provider tier).
const (
	MaxRequestsPerMinute  = 1_000_000
	MaxTokensPerMinute    = 1_000_000_000
	MaxConcurrentRequests = 10_000
)

// Spec is the "rate_limit" block of a model configuration: the endpoint's
// declared limits. A zero field is no limit on that dimension; at least
// one is set.
type Spec struct {
	RequestsPerMinute  int64 `json:"requests_per_minute,omitempty"`
	TokensPerMinute    int64 `json:"tokens_per_minute,omitempty"`
	ConcurrentRequests int64 `json:"concurrent_requests,omitempty"`
}

// ConfigError is a refused "rate_limit" block: Key names the offending key
// (rate_limit.requests_per_minute, ...) and Detail says what is valid.
type ConfigError struct {
	Key    string
	Detail string
}

func (e *ConfigError) Error() string { return e.Key + ": " + e.Detail }

// ParseSpec decodes and validates a "rate_limit" block: an object of the
// Spec keys (unknown keys are errors), each an integer within its bound.
// A key given as 0 or a negative number is refused rather than read as
// "no limit", which omitting it says.
func ParseSpec(raw json.RawMessage) (Spec, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil || keys == nil {
		return Spec{}, &ConfigError{Key: "rate_limit", Detail: "want an object of requests_per_minute, tokens_per_minute and concurrent_requests"}
	}
	var s Spec
	fields := []struct {
		name  string
		into  *int64
		limit int64
	}{
		{"requests_per_minute", &s.RequestsPerMinute, MaxRequestsPerMinute},
		{"tokens_per_minute", &s.TokensPerMinute, MaxTokensPerMinute},
		{"concurrent_requests", &s.ConcurrentRequests, MaxConcurrentRequests},
	}
	for _, f := range fields {
		v, ok := keys[f.name]
		if !ok {
			continue
		}
		delete(keys, f.name)
		key := "rate_limit." + f.name
		var n json.Number
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.UseNumber()
		if err := dec.Decode(&n); err != nil {
			return Spec{}, &ConfigError{Key: key, Detail: fmt.Sprintf("want an integer in 1..%d", f.limit)}
		}
		x, err := n.Int64()
		if err != nil || x < 1 || x > f.limit {
			return Spec{}, &ConfigError{Key: key, Detail: fmt.Sprintf("%s is not an integer in 1..%d", n.String(), f.limit)}
		}
		*f.into = x
	}
	for k := range keys {
		return Spec{}, &ConfigError{Key: "rate_limit." + k, Detail: "unknown key (want requests_per_minute, tokens_per_minute or concurrent_requests)"}
	}
	return s, s.Validate()
}

// Validate checks the bounds (the decoded form of ParseSpec's rules).
func (s Spec) Validate() error {
	for _, f := range []struct {
		key      string
		v, limit int64
	}{
		{"rate_limit.requests_per_minute", s.RequestsPerMinute, MaxRequestsPerMinute},
		{"rate_limit.tokens_per_minute", s.TokensPerMinute, MaxTokensPerMinute},
		{"rate_limit.concurrent_requests", s.ConcurrentRequests, MaxConcurrentRequests},
	} {
		if f.v < 0 || f.v > f.limit {
			return &ConfigError{Key: f.key, Detail: fmt.Sprintf("%d out of range 1..%d", f.v, f.limit)}
		}
	}
	if s == (Spec{}) {
		return &ConfigError{Key: "rate_limit", Detail: "names no limit: set requests_per_minute, tokens_per_minute or concurrent_requests"}
	}
	return nil
}

// Limits are limits in force: per-minute rates and a concurrency bound.
// Unlike a Spec, a zero field admits nothing (a worker granted no share);
// Unlimited and UnlimitedConcurrent are no limit.
type Limits struct {
	RPM        float64
	TPM        float64
	Concurrent int
}

// No limit on a dimension of Limits.
var Unlimited = math.Inf(1)

// UnlimitedConcurrent is no concurrency bound.
const UnlimitedConcurrent = math.MaxInt32

// Limits returns the declared limits.
func (s Spec) Limits() Limits {
	l := Limits{RPM: Unlimited, TPM: Unlimited, Concurrent: UnlimitedConcurrent}
	if s.RequestsPerMinute > 0 {
		l.RPM = float64(s.RequestsPerMinute)
	}
	if s.TokensPerMinute > 0 {
		l.TPM = float64(s.TokensPerMinute)
	}
	if s.ConcurrentRequests > 0 {
		l.Concurrent = int(s.ConcurrentRequests)
	}
	return l
}

// Scale multiplies the limits by f in (0, 1]; a concurrency bound stays
// at least 1.
func (l Limits) Scale(f float64) Limits {
	out := Limits{RPM: l.RPM * f, TPM: l.TPM * f, Concurrent: l.Concurrent}
	if l.Concurrent != UnlimitedConcurrent {
		out.Concurrent = max(1, int(math.Floor(float64(l.Concurrent)*f)))
	}
	return out
}

// Add sums two grants (for Allot's othersHeld).
func (l Limits) Add(o Limits) Limits {
	out := Limits{RPM: l.RPM + o.RPM, TPM: l.TPM + o.TPM}
	out.Concurrent = int(min(int64(l.Concurrent)+int64(o.Concurrent), UnlimitedConcurrent))
	return out
}
