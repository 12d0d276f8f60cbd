package observability

import (
	"errors"
	"net/url"
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

// The standard OpenTelemetry variables the binary also reads
// (ExporterFromEnv).
const (
	EnvOTELEndpoint           = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvOTELTracesEndpoint     = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvOTELServiceName        = "OTEL_SERVICE_NAME"
	EnvOTELResourceAttributes = "OTEL_RESOURCE_ATTRIBUTES"
)

// Bounds of OTEL_RESOURCE_ATTRIBUTES.
const (
	MaxResourceAttributes     = 32
	MaxResourceAttrKeyBytes   = 128
	MaxResourceAttrValueBytes = 256
	maxResourceEnvBytes       = 8192
)

// ExporterFromEnv builds the binary's OTLP exporter from the environment,
// or returns nil, nil when no endpoint variable is set. Precedence:
//
//  1. ADK_OTLP_ENDPOINT, an origin (http://host:port): spans go to
//     /v1/traces, envelopes to /v1/logs.
//  2. OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, the full traces URL (used as
//     is); envelopes go to /v1/logs of its origin.
//  3. OTEL_EXPORTER_OTLP_ENDPOINT, a base URL: /v1/traces and /v1/logs
//     are appended to its path, as the OpenTelemetry SDKs do.
//
// OTEL_EXPORTER_OTLP_HEADERS applies to all three. service.name is
// OTEL_SERVICE_NAME, else service.name of OTEL_RESOURCE_ATTRIBUTES, else
// defService; the other resource attributes are kept (bounded, no
// content or credential keys). Every malformed value is an *EnvError
// naming the variable (and entry), never echoing a value.
func ExporterFromEnv(getenv func(string) string, defService string) (*ExporterDescriptor, error) {
	res, err := ResourceFromEnv(getenv, defService)
	if err != nil {
		return nil, err
	}
	cfg := OTLPConfig{Timeout: DeploymentOTLPTimeout, AllowPrivateHosts: true, Resource: res}
	var name string
	switch {
	case getenv(EnvOTLPEndpoint) != "":
		name = EnvOTLPEndpoint
		cfg.Endpoint = getenv(name)
	case getenv(EnvOTELTracesEndpoint) != "":
		name = EnvOTELTracesEndpoint
		origin, path, err := splitEndpointURL(getenv(name))
		if err != nil {
			return nil, &EnvError{Var: name, Reason: err.Error()}
		}
		cfg.Endpoint, cfg.TracesPath = origin, path
	case getenv(EnvOTELEndpoint) != "":
		name = EnvOTELEndpoint
		origin, path, err := splitEndpointURL(getenv(name))
		if err != nil {
			return nil, &EnvError{Var: name, Reason: err.Error()}
		}
		base := strings.TrimSuffix(path, "/")
		cfg.Endpoint, cfg.TracesPath, cfg.LogsPath = origin, base+"/v1/traces", base+"/v1/logs"
	default:
		return nil, nil
	}
	if len(getenv(name)) > MaxOTLPEndpointBytes {
		return nil, &EnvError{Var: name, Reason: "too_long"}
	}
	if err := validateEndpoint(cfg.Endpoint); err != nil {
		return nil, &EnvError{Var: name, Reason: err.(*OTLPConfigError).Reason}
	}
	if cfg.Headers, err = ParseOTLPHeadersEnv(getenv(EnvOTLPHeaders)); err != nil {
		return nil, err
	}
	exp, err := NewOTLPExporter(cfg)
	if err != nil {
		v, reason := name, "invalid"
		if ce, ok := err.(*OTLPConfigError); ok {
			reason = ce.Field + "_" + ce.Reason
			if ce.Field == "headers" || strings.HasPrefix(ce.Field, "header") {
				v = EnvOTLPHeaders
			}
		}
		return nil, &EnvError{Var: v, Reason: reason}
	}
	return &ExporterDescriptor{ID: DeploymentExporterID, Exporter: exp, Timeout: DeploymentExporterTimeout, FailurePolicy: FailOpen}, nil
}

// splitEndpointURL splits an http(s) URL into its origin and path (no
// query, fragment or userinfo).
func splitEndpointURL(s string) (origin, path string, err error) {
	if len(s) > MaxOTLPEndpointBytes {
		return "", "", errors.New("too_long")
	}
	u, perr := url.Parse(s)
	switch {
	case perr != nil:
		return "", "", errors.New("invalid")
	case u.Scheme != "http" && u.Scheme != "https":
		return "", "", errors.New("scheme")
	case u.User != nil:
		return "", "", errors.New("userinfo")
	case u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(s, "?#"):
		return "", "", errors.New("query_or_fragment")
	}
	path = u.EscapedPath()
	if path != "" && !validExportPath(path) && !validExportPath(strings.TrimSuffix(path, "/")) {
		return "", "", errors.New("path")
	}
	return u.Scheme + "://" + u.Host, path, nil
}

// ResourceFromEnv reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
// (comma-separated key=value, values percent-decoded once, at most 32
// entries, keys ≤128 and values ≤256 bytes, no duplicate, content or
// credential-like key).
func ResourceFromEnv(getenv func(string) string, defService string) (Resource, error) {
	res := Resource{ServiceName: defService}
	raw := getenv(EnvOTELResourceAttributes)
	if len(raw) > maxResourceEnvBytes {
		return res, &EnvError{Var: EnvOTELResourceAttributes, Reason: "too_long"}
	}
	if strings.TrimSpace(raw) != "" {
		entries := strings.Split(raw, ",")
		if len(entries) > MaxResourceAttributes {
			return res, &EnvError{Var: EnvOTELResourceAttributes, Reason: "too_many_entries"}
		}
		res.Attributes = make(map[string]string, len(entries))
		for i, e := range entries {
			fail := func(reason string) (Resource, error) {
				return res, &EnvError{Var: EnvOTELResourceAttributes, Entry: i + 1, Reason: reason}
			}
			k, v, ok := strings.Cut(e, "=")
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if !ok || k == "" {
				return fail("want_key_equals_value")
			}
			dv, ok := percentDecodeOnce(v)
			if !ok || !utf8.ValidString(dv) {
				return fail("invalid_value_encoding")
			}
			switch {
			case len(k) > MaxResourceAttrKeyBytes || !isAttrKey(k):
				return fail("invalid_key")
			case len(dv) > MaxResourceAttrValueBytes:
				return fail("value_too_long")
			case IsForbiddenAttributeKey(k) || isSensitiveKey(k):
				return fail("content_or_credential_key")
			}
			if _, dup := res.Attributes[k]; dup {
				return fail("duplicate_key")
			}
			res.Attributes[k] = dv
		}
		if sn := res.Attributes["service.name"]; sn != "" {
			res.ServiceName = sn
		}
		if sv := res.Attributes["service.version"]; sv != "" {
			res.ServiceVersion = sv
		}
		delete(res.Attributes, "service.name")
		delete(res.Attributes, "service.version")
	}
	if sn := strings.TrimSpace(getenv(EnvOTELServiceName)); sn != "" {
		if len(sn) > MaxResourceAttrValueBytes || !utf8.ValidString(sn) {
			return res, &EnvError{Var: EnvOTELServiceName, Reason: "invalid"}
		}
		res.ServiceName = sn
	}
	return res, nil
}

// isAttrKey: printable ASCII without spaces, quotes or separators.
func isAttrKey(k string) bool {
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c <= ' ' || c >= 0x7f || c == '"' || c == ',' || c == '=' || c == ';' || c == '\\' {
			return false
		}
	}
	return true
}
