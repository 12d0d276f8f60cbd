package observability

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Deployment environment variables (CONTRACTS §2.9).
const (
	// EnvOTLPEndpoint is the only switch that activates deployment export.
	EnvOTLPEndpoint = "ADK_OTLP_ENDPOINT"
	// EnvOTLPHeaders carries export headers; ignored unless EnvOTLPEndpoint
	// is set, so ambient credentials never enable export on their own.
	EnvOTLPHeaders = "OTEL_EXPORTER_OTLP_HEADERS"
)

// Deployment exporter bounds.
const (
	DeploymentOTLPTimeout     = 3000 * time.Millisecond // the HTTP attempt
	DeploymentExporterTimeout = 4000 * time.Millisecond // the exporter call
	maxEnvHeadersBytes        = 32768
)

// EnvError fails startup on a bad deployment environment. It names the
// variable, the entry index (for headers) and a reason, never a value.
type EnvError struct {
	Var    string
	Entry  int // 1-based header entry, 0 when not applicable
	Reason string
}

// Error implements error.
func (e *EnvError) Error() string {
	if e.Entry > 0 {
		return "invalid_deployment_env: " + e.Var + ": entry " + strconv.Itoa(e.Entry) + ": " + e.Reason
	}
	return "invalid_deployment_env: " + e.Var + ": " + e.Reason
}

// DeploymentExporter builds the deployment-owned OTLP exporter from the
// environment (getenv is os.Getenv in production). It returns nil, nil when
// EnvOTLPEndpoint is unset or empty. Otherwise it validates the endpoint
// and headers strictly and returns a fail-open descriptor with ID
// DeploymentExporterID: a 3 s HTTP attempt inside a 4 s exporter deadline.
// Private hosts are allowed: the operator named the endpoint, and in-cluster
// collectors live on private addresses. The caller closes the returned
// exporter (descriptor.Exporter.(*OTLPExporter)).
func DeploymentExporter(getenv func(string) string, res Resource) (*ExporterDescriptor, error) {
	endpoint := getenv(EnvOTLPEndpoint)
	if endpoint == "" {
		return nil, nil
	}
	if len(endpoint) > MaxOTLPEndpointBytes {
		return nil, &EnvError{Var: EnvOTLPEndpoint, Reason: "too_long"}
	}
	if err := validateEndpoint(endpoint); err != nil {
		return nil, &EnvError{Var: EnvOTLPEndpoint, Reason: err.(*OTLPConfigError).Reason}
	}
	headers, err := ParseOTLPHeadersEnv(getenv(EnvOTLPHeaders))
	if err != nil {
		return nil, err
	}
	exp, err := NewOTLPExporter(OTLPConfig{
		Endpoint:          endpoint,
		Headers:           headers,
		Timeout:           DeploymentOTLPTimeout,
		AllowPrivateHosts: true,
		Resource:          res,
	})
	if err != nil {
		reason := "invalid"
		if ce, ok := err.(*OTLPConfigError); ok {
			reason = ce.Field + "_" + ce.Reason
		}
		return nil, &EnvError{Var: EnvOTLPHeaders, Reason: reason}
	}
	return &ExporterDescriptor{
		ID:            DeploymentExporterID,
		Exporter:      exp,
		Timeout:       DeploymentExporterTimeout,
		FailurePolicy: FailOpen,
	}, nil
}

// ParseOTLPHeadersEnv parses OTEL_EXPORTER_OTLP_HEADERS strictly: at most
// 32768 bytes and 32 comma-separated key=value entries; optional whitespace
// trimmed around entries, names and values; names lowercased (not decoded);
// values percent-decoded exactly once. Empty entries, semicolon metadata,
// malformed escapes, invalid decoded UTF-8 and case-insensitive duplicate
// names fail. "" is no headers.
func ParseOTLPHeadersEnv(s string) (map[string]string, error) {
	fail := func(entry int, reason string) (map[string]string, error) {
		return nil, &EnvError{Var: EnvOTLPHeaders, Entry: entry, Reason: reason}
	}
	if len(s) > maxEnvHeadersBytes {
		return fail(0, "too_large")
	}
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	if strings.Count(s, ",")+1 > MaxOTLPHeaders {
		return fail(0, "too_many_entries")
	}
	out := make(map[string]string)
	for i, entry := range strings.Split(s, ",") {
		n := i + 1
		entry = trimOWS(entry)
		if entry == "" {
			return fail(n, "empty_entry")
		}
		if strings.ContainsRune(entry, ';') {
			return fail(n, "metadata_not_supported")
		}
		name, value, ok := strings.Cut(entry, "=")
		if !ok {
			return fail(n, "missing_equals")
		}
		name = strings.ToLower(trimOWS(name))
		if name == "" || !isToken(name) {
			return fail(n, "invalid_name")
		}
		decoded, ok := percentDecodeOnce(trimOWS(value))
		if !ok {
			return fail(n, "invalid_escape")
		}
		if !utf8.ValidString(decoded) {
			return fail(n, "invalid_utf8")
		}
		if _, dup := out[name]; dup {
			return fail(n, "duplicate_name")
		}
		out[name] = decoded
	}
	return out, nil
}

// percentDecodeOnce decodes %XX escapes a single time ("%2541" is "%41");
// '+' stays literal.
func percentDecodeOnce(s string) (string, bool) {
	if !strings.Contains(s, "%") {
		return s, true
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			return "", false
		}
		b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
		i += 2
	}
	return b.String(), true
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}
