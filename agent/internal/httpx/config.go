package httpx

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/fadcedab/adk/agent/model"
)

// Setup checks a provider's shared configuration and returns its base URL
// (def when cfg names none, without a trailing slash), its API key ("" for
// none) and its client. name is the provider's gen_ai.provider.name; label
// prefixes every error ("openai config"), which names the key at fault and
// never a value. hc may be nil (the shared tuned transport).
func Setup(label, name, def string, hc *http.Client, cfg model.HTTPConfig) (base, key string, c Client, err error) {
	if base, err = BaseURL(label, cfg.BaseURL, def); err != nil {
		return "", "", c, err
	}
	if key, err = APIKey(label, cfg.APIKeyEnv); err != nil {
		return "", "", c, err
	}
	if c, err = NewClient(name, hc, cfg); err != nil {
		return "", "", c, fmt.Errorf("%s: %w", label, err)
	}
	return base, key, c, nil
}

// BaseURL validates a provider's configured base URL (def when empty): an
// http(s) URL with a host, without credentials or a query. It returns the
// URL without a trailing slash. label prefixes the error ("openai config").
func BaseURL(label, base, def string) (string, error) {
	if base == "" {
		base = def
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" {
		return "", fmt.Errorf("%s: base_url must be an http(s) URL without credentials or query", label)
	}
	return strings.TrimRight(base, "/"), nil
}

// APIKey reads the key from the environment variable env. A named variable
// that is unset or empty is an error, so a missing key fails the build
// rather than every call; an empty env means no key. The error names the
// variable, never its value.
func APIKey(label, env string) (string, error) {
	if env == "" {
		return "", nil
	}
	key := os.Getenv(env)
	if key == "" {
		return "", fmt.Errorf("%s: api_key_env %s is not set", label, env)
	}
	return key, nil
}
