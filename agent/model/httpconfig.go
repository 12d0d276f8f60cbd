package model

// HTTPConfig is the part of a remote provider's configuration that every
// provider shares: where it posts, which environment variable holds its
// key, and the bounds of each call. Providers embed it, so its keys sit at
// the top level of a model configuration in AGENT.json. A zero field means
// the provider's default; the bounds are checked when the provider is
// built.
type HTTPConfig struct {
	// BaseURL is an http(s) URL without credentials or query; "" is the
	// provider's public endpoint.
	BaseURL string `json:"base_url,omitempty"`
	// APIKeyEnv names the environment variable holding the API key. A named
	// variable that is unset or empty fails the build; "" sends no key.
	APIKeyEnv string `json:"api_key_env,omitempty"`
	// TimeoutMS bounds each attempt (default 60 s, at most 10 min).
	TimeoutMS int `json:"timeout_ms,omitempty"`
	// MaxAttempts bounds the attempts of one call, retrying only 429 and
	// 5xx (default 3, at most 10).
	MaxAttempts int `json:"max_attempts,omitempty"`
	// MaxResponseBytes bounds a response body (default 8 MiB, at most
	// 64 MiB).
	MaxResponseBytes int64 `json:"max_response_bytes,omitempty"`
	// BaseBackoffMS and MaxBackoffMS shape the jittered exponential backoff
	// between attempts (defaults 250 ms and 20 s); MaxBackoffMS also caps a
	// server's Retry-After.
	BaseBackoffMS int `json:"base_backoff_ms,omitempty"`
	MaxBackoffMS  int `json:"max_backoff_ms,omitempty"`
}
