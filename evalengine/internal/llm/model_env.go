package llm

import (
	"encoding/json"
	"net/http"
	"os"
	"time"

	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/agent/model/gemini"
	"github.com/fadcedab/adk/agent/model/openai"
	"github.com/fadcedab/adk/agent/model/ratelimit"
	"github.com/fadcedab/adk/evalengine/internal/evalcore"
	"github.com/fadcedab/adk/internal/secrets"
)

// Default API key environment variables, used when a provider config
// names neither api_key_env nor api_key.
const (
	DefaultGeminiAPIKeyEnv = "GEMINI_API_KEY"
	DefaultOpenAIAPIKeyEnv = "OPENAI_API_KEY"
)

// modelProviderConfigKeys are the provider_config keys NewModelProvider
// understands.
var modelProviderConfigKeys = evalcore.KeySet("base_url", "api_key_env", "api_key", "max_attempts",
	"max_response_bytes", "base_backoff_ms", "max_backoff_ms", "rate_limit")

// ModelEnv is what the machine running an evaluation supplies to
// model-backed metrics (the LLM judge) and simulators (the LLM user): the
// provider, model and provider configuration from the operator's own
// configuration, and credentials only through environment variables. It
// is never read from an eval set or a criteria file.
//
// A JudgeConfig (or simulator config) built in Go may name its own
// Provider, Model or ProviderConfig; when it sets any of the three, the
// env's three are ignored as a whole, so a provider never runs with
// another provider's settings. Otherwise the env's are used (provider
// default "gemini", model default "gemini-3.1-flash-lite").
type ModelEnv struct {
	Provider       string         // "gemini" | "openai"
	Model          string         // a bare model name
	ProviderConfig map[string]any // see NewModelProvider
	// NewProvider, when set, builds every provider instead of
	// NewModelProvider: how tests inject a deterministic provider. It is
	// a Go value, so no file can select it.
	NewProvider ProviderFactory
	// HTTPClient is passed to NewModelProvider (nil: the providers'
	// shared transport, and their lean path for http:// endpoints).
	HTTPClient *http.Client
	// AttemptTimeoutMS, when positive, bounds each HTTP attempt of a
	// provider NewModelProvider builds, below the spec's own per-attempt
	// timeout (a judge file's timeout_ms).
	AttemptTimeoutMS int
	// RateLimits owns the limiters of the endpoints whose provider_config
	// declares a rate_limit: every provider built through an env holding
	// the same RateLimits (a judge per llm_judge metric, the LLM user of
	// every scenario) shares one limiter per endpoint. A run owns one and
	// gives it to its judge's and its simulator's envs (adk eval run
	// does). nil is one set shared by the whole process, so a Go
	// caller that sets nothing still gets one limiter per endpoint.
	RateLimits *RateLimiters
	// RateLimitSource names this env's configuration in a rate-limit
	// conflict (e.g. "--judge-config"); empty: "provider_config".
	RateLimitSource string
}

// RateLimiters is the process's limiter registry (ratelimit.Registry):
// one limiter per endpoint (provider, base URL, model), shared with the
// process's agents when the caller gives both the same registry.
type RateLimiters = ratelimit.Registry

// NewRateLimiters returns an empty registry.
func NewRateLimiters() *RateLimiters { return ratelimit.NewRegistry() }

// defaultRateLimits is the registry a ModelEnv without RateLimits uses.
var defaultRateLimits = NewRateLimiters()

// parseRateLimit reads provider_config.rate_limit (absent: ok false).
// The schema and bounds are the AGENT.json model block's
// (ratelimit.ParseSpec); a bad value is invalid_provider_config naming
// provider_config.rate_limit.<key>.
func parseRateLimit(pc map[string]any) (spec ratelimit.Spec, ok bool, err error) {
	v, present := pc["rate_limit"]
	if !present {
		return ratelimit.Spec{}, false, nil
	}
	raw, err := json.Marshal(v)
	if err == nil {
		spec, err = ratelimit.ParseSpec(raw)
	}
	if err != nil {
		detail := "provider_config.rate_limit: want an object of requests_per_minute, tokens_per_minute and concurrent_requests"
		if ce, isCE := err.(*ratelimit.ConfigError); isCE {
			detail = "provider_config." + ce.Key + ": " + ce.Detail
		}
		return ratelimit.Spec{}, false, &evalcore.Error{Code: CodeLLMJudge, Reason: JudgeInvalidProviderConfig, Detail: evalcore.Bound(detail)}
	}
	return spec, true, nil
}

// ProviderFactory builds the provider for a spec.
type ProviderFactory func(spec ProviderSpec) (model.Provider, error)

// ProviderSpec is a resolved provider choice.
type ProviderSpec struct {
	Provider string         // "gemini" | "openai"
	Model    string         // a bare model name
	Config   map[string]any // provider_config, validated
	// RequestTimeoutMS is the caller's per-call deadline, used as the
	// per-attempt HTTP timeout.
	RequestTimeoutMS int
	// MaxOutputBytes is the caller's answer bound; the HTTP response cap
	// defaults to a multiple of it.
	MaxOutputBytes int
}

// spec resolves provider, model and provider_config (see ModelEnv).
func (env ModelEnv) spec(provider, modelName string, pc map[string]any) (ProviderSpec, error) {
	if provider == "" && modelName == "" && pc == nil {
		provider, modelName, pc = env.Provider, env.Model, env.ProviderConfig
	}
	if provider == "" {
		provider = DefaultJudgeProvider
	}
	if provider != ProviderGemini && provider != ProviderOpenAI {
		return ProviderSpec{}, judgeErr(JudgeInvalidProvider, nil)
	}
	if modelName == "" && provider == ProviderGemini {
		modelName = DefaultJudgeModel
	}
	if !validModelName(modelName) {
		return ProviderSpec{}, judgeErr(JudgeInvalidModel, nil)
	}
	if pc != nil {
		if err := checkProviderConfig(pc); err != nil {
			return ProviderSpec{}, err
		}
	}
	return ProviderSpec{Provider: provider, Model: modelName, Config: pc}, nil
}

// build makes the provider through env.NewProvider or NewModelProvider.
func (env ModelEnv) build(spec ProviderSpec) (model.Provider, error) {
	var (
		p   model.Provider
		err error
	)
	if env.NewProvider != nil {
		p, err = env.NewProvider(spec)
	} else {
		if t := env.AttemptTimeoutMS; t > 0 && (spec.RequestTimeoutMS <= 0 || t < spec.RequestTimeoutMS) {
			spec.RequestTimeoutMS = t
		}
		p, err = NewModelProvider(spec, env.HTTPClient)
	}
	if err != nil || p == nil {
		// The factory's error may name configuration; it is not kept.
		return nil, judgeErr(JudgeInvalidProviderConfig, nil)
	}
	rl, limited, err := parseRateLimit(spec.Config)
	if err != nil || !limited {
		return p, err
	}
	set := env.RateLimits
	if set == nil {
		set = defaultRateLimits
	}
	source := env.RateLimitSource
	if source == "" {
		source = "provider_config"
	}
	l, err := set.Limiter(endpointKey(p, spec), rl, source)
	if err != nil {
		return nil, &evalcore.Error{Code: CodeLLMJudge, Reason: JudgeInvalidProviderConfig,
			Detail: evalcore.Bound("provider_config." + err.Error())}
	}
	return ratelimit.Wrap(p, l), nil
}

// endpointKey names the endpoint a provider calls, as agent configs do
// (ratelimit.EndpointKey: provider, base URL, model): the key limits are
// shared under. A provider that does not say its URL (a test's) is keyed
// by the spec's base_url.
func endpointKey(p model.Provider, spec ProviderSpec) string {
	base, _ := spec.Config["base_url"].(string)
	if e, ok := p.(interface{ Endpoint() string }); ok {
		base = e.Endpoint()
	}
	return ratelimit.EndpointKey(p.Name(), base, spec.Model)
}

// apiKeyEnv is the environment variable the spec's key comes from, or "".
func (spec ProviderSpec) apiKeyEnv() string {
	if _, literal := spec.Config["api_key"]; literal {
		return ""
	}
	if v, ok := spec.Config["api_key_env"]; ok {
		s, _ := v.(string)
		return s
	}
	if spec.Provider == ProviderOpenAI {
		return DefaultOpenAIAPIKeyEnv
	}
	return DefaultGeminiAPIKeyEnv
}

// redactor redacts every credential the spec can reach: the values of the
// API key variables it names or defaults to (even when a literal api_key
// wins: redacting too much is harmless) and every string under a
// secret-named key of its provider_config (api_key, ...).
func (spec ProviderSpec) redactor() *secrets.Redactor {
	names := []string{DefaultGeminiAPIKeyEnv}
	if spec.Provider == ProviderOpenAI {
		names[0] = DefaultOpenAIAPIKeyEnv
	}
	if s, ok := spec.Config["api_key_env"].(string); ok && s != "" {
		names = append(names, s)
	}
	vals := secrets.SecretsFromEnv(names...)
	var walk func(v any, sensitive bool)
	walk = func(v any, sensitive bool) {
		switch x := v.(type) {
		case string:
			if sensitive {
				vals = append(vals, x)
			}
		case map[string]any:
			for k, e := range x {
				walk(e, sensitive || secrets.IsSensitiveKey(k))
			}
		case []any:
			for _, e := range x {
				walk(e, sensitive)
			}
		}
	}
	walk(spec.Config, false)
	return secrets.NewRedactor(vals...)
}

// NewModelProvider builds the gemini or openai provider of the runtime for
// spec. provider_config may hold base_url, api_key_env (default
// GEMINI_API_KEY or OPENAI_API_KEY; "" for none; a named variable that is
// unset is an error, an unset default is no key), api_key (a literal key
// for Go callers that hold one), max_attempts, max_response_bytes,
// base_backoff_ms, max_backoff_ms and rate_limit (validated here; the
// limiter is ModelEnv's, see RateLimits). Other keys are
// invalid_provider_config.
func NewModelProvider(spec ProviderSpec, hc *http.Client) (model.Provider, error) {
	pc := spec.Config
	if unk := evalcore.UnknownKeys(pc, modelProviderConfigKeys); len(unk) > 0 {
		return nil, &evalcore.Error{Code: CodeLLMJudge, Reason: JudgeInvalidProviderConfig, Detail: evalcore.KeysDetail(unk)}
	}
	bad := judgeErr(JudgeInvalidProviderConfig, nil)
	str := func(key string) (string, bool) {
		v, present := pc[key]
		if !present {
			return "", true
		}
		s, ok := v.(string)
		return s, ok
	}
	num := func(key string) (int64, bool) {
		v, present := pc[key]
		if !present {
			return 0, true
		}
		n, ok := evalcore.JSONInt(v)
		return n, ok && n >= 0
	}
	baseURL, ok1 := str("base_url")
	apiKey, ok2 := str("api_key")
	_, ok7 := str("api_key_env")
	attempts, ok3 := num("max_attempts")
	maxBytes, ok4 := num("max_response_bytes")
	baseBackoff, ok5 := num("base_backoff_ms")
	maxBackoff, ok6 := num("max_backoff_ms")
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || !ok7 {
		return nil, bad
	}
	if _, present := pc["api_key"]; present && apiKey == "" {
		return nil, bad
	}
	keyEnv := spec.apiKeyEnv()
	if _, named := pc["api_key_env"]; !named && os.Getenv(keyEnv) == "" {
		keyEnv = "" // an unset default variable means no key
	}
	if maxBytes == 0 && spec.MaxOutputBytes > 0 {
		// The answer is JSON-escaped inside the provider's envelope.
		maxBytes = int64(4*spec.MaxOutputBytes + 64<<10)
	}
	if apiKey != "" {
		hc = withHeader(hc, spec.Provider, apiKey)
	}
	shared := model.HTTPConfig{
		BaseURL: baseURL, APIKeyEnv: keyEnv, TimeoutMS: spec.RequestTimeoutMS,
		MaxAttempts: int(attempts), MaxResponseBytes: maxBytes, BaseBackoffMS: int(baseBackoff), MaxBackoffMS: int(maxBackoff),
	}
	var (
		p   model.Provider
		err error
	)
	switch spec.Provider {
	case ProviderGemini:
		p, err = gemini.New(gemini.Config{Model: spec.Model, HTTPConfig: shared}, hc)
	case ProviderOpenAI:
		p, err = openai.New(openai.Config{Model: spec.Model, HTTPConfig: shared}, hc)
	default:
		return nil, judgeErr(JudgeInvalidProvider, nil)
	}
	if err != nil {
		return nil, bad
	}
	return p, nil
}

// withHeader returns a client whose requests carry the provider's API key
// header.
func withHeader(hc *http.Client, provider, key string) *http.Client {
	base := http.DefaultTransport
	out := &http.Client{}
	if hc != nil {
		*out = *hc
		if hc.Transport != nil {
			base = hc.Transport
		}
	}
	name, value := "x-goog-api-key", key
	if provider == ProviderOpenAI {
		name, value = "Authorization", "Bearer "+key
	}
	out.Transport = headerTransport{base: base, name: name, value: value}
	return out
}

// headerTransport sets one header on every request.
type headerTransport struct {
	base        http.RoundTripper
	name, value string
}

// RoundTrip clones the request (RoundTrippers must not modify it) and
// sets the header.
func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r2 := r.Clone(r.Context())
	r2.Header.Set(t.name, t.value)
	return t.base.RoundTrip(r2)
}

// msDuration converts milliseconds.
func msDuration(ms int) time.Duration { return time.Duration(ms) * time.Millisecond }
