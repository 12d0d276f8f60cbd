package httpx

import (
	"fmt"
	"net/url"
	"os"
	"strings"
)

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
