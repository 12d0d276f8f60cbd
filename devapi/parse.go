package devapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Bounds of requests (CONTRACTS §7) and of this package's parsers.
const (
	// MaxBodyBytes bounds a request body.
	MaxBodyBytes = 64 << 10
	// MaxResponseBytes bounds every response but reports.
	MaxResponseBytes = 1 << 20
	// MaxReportBytes is the default and ceiling of a report response.
	MaxReportBytes = 16 << 20
	// MaxQueryBytes bounds the raw query string.
	MaxQueryBytes = 4 << 10
	// MaxQueryValueBytes bounds one query parameter value.
	MaxQueryValueBytes = 1 << 10
	// MaxPathParamBytes bounds one path parameter (a set id, a name).
	MaxPathParamBytes = 256
)

// parseQuery reads a raw query string strictly: every key must be in
// allowed, none may repeat, escapes must be valid, values are UTF-8 and
// at most MaxQueryValueBytes. A key without "=" has the empty value.
func parseQuery(raw string, allowed []string) (map[string]string, *Error) {
	bad := func(msg string) *Error { return errorf(http.StatusBadRequest, CodeInvalidQuery, msg) }
	if len(raw) > MaxQueryBytes {
		return nil, bad("query string longer than " + strconv.Itoa(MaxQueryBytes) + " bytes")
	}
	out := map[string]string{}
	if raw == "" {
		return out, nil
	}
	for _, part := range strings.Split(raw, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		key, err := url.QueryUnescape(k)
		if err != nil {
			return nil, bad("query parameter name is not valid percent-encoding")
		}
		val, err := url.QueryUnescape(v)
		if err != nil {
			return nil, bad("query parameter " + strconv.Quote(key) + ": value is not valid percent-encoding")
		}
		if !isAllowed(key, allowed) {
			return nil, bad("unknown query parameter " + strconv.Quote(key) + "; valid: " + strings.Join(allowed, ", ")).
				with(map[string]any{"parameter": key, "valid": allowed})
		}
		if _, dup := out[key]; dup {
			return nil, bad("query parameter " + strconv.Quote(key) + " given twice").with(map[string]any{"parameter": key})
		}
		if len(val) > MaxQueryValueBytes || !utf8.ValidString(val) || strings.ContainsRune(val, 0) {
			return nil, bad("query parameter " + strconv.Quote(key) + ": value must be UTF-8 without NUL, at most " + strconv.Itoa(MaxQueryValueBytes) + " bytes").
				with(map[string]any{"parameter": key})
		}
		out[key] = val
	}
	return out, nil
}

func isAllowed(k string, allowed []string) bool {
	for _, a := range allowed {
		if a == k {
			return true
		}
	}
	return false
}

// queryInt reads an optional integer parameter in [lo, hi]; def when absent.
func queryInt(q map[string]string, key string, def, lo, hi int64) (int64, *Error) {
	s, ok := q[key]
	if !ok {
		return def, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, errorf(http.StatusBadRequest, CodeInvalidQuery,
			"query parameter "+strconv.Quote(key)+" must be an integer in "+strconv.FormatInt(lo, 10)+".."+strconv.FormatInt(hi, 10)).
			with(map[string]any{"parameter": key})
	}
	return n, nil
}

// readBody reads a JSON request body of at most MaxBodyBytes: the
// content type must be application/json (a browser cannot send that
// cross-origin without a preflight this server never grants).
func readBody(r *http.Request) ([]byte, *Error) {
	ct := r.Header.Get("content-type")
	mt, _, _ := strings.Cut(ct, ";")
	if !strings.EqualFold(strings.TrimSpace(mt), "application/json") {
		return nil, errorf(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "request body must be application/json")
	}
	if r.ContentLength > MaxBodyBytes {
		return nil, tooLarge()
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
	if err != nil {
		return nil, errorf(http.StatusBadRequest, CodeInvalidRequest, "reading the request body failed")
	}
	if len(data) > MaxBodyBytes {
		return nil, tooLarge()
	}
	return data, nil
}

func tooLarge() *Error {
	return errorf(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "request body larger than "+strconv.Itoa(MaxBodyBytes)+" bytes").
		with(map[string]any{"max_bytes": MaxBodyBytes})
}

// decodeBody decodes exactly one JSON object into v, refusing unknown
// fields, trailing data and (for a code) duplicate keys at the top level.
func decodeBody(data []byte, v any, code string) *Error {
	bad := func(msg string) *Error { return errorf(http.StatusBadRequest, code, msg) }
	if !utf8.Valid(data) {
		return bad("request body is not UTF-8")
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return bad("request body must be a JSON object")
	}
	if dup := duplicateTopKey(trimmed); dup != "" {
		return bad("request body names " + strconv.Quote(dup) + " twice").with(map[string]any{"field": dup})
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		msg := err.Error()
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			msg = "field " + strconv.Quote(ute.Field) + " must be " + ute.Type.String()
		}
		if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
			return bad("unknown field " + f).with(map[string]any{"field": strings.Trim(f, `"`)})
		}
		return bad("request body: " + msg)
	}
	if dec.More() {
		return bad("request body has data after the JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return bad("request body has data after the JSON object")
	}
	return nil
}

// duplicateTopKey returns a key the top-level object of data names
// twice, or "". Invalid JSON returns "" (the decoder reports it).
func duplicateTopKey(data []byte) string {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return ""
		}
		k, ok := t.(string)
		if !ok {
			return ""
		}
		if seen[k] {
			return k
		}
		seen[k] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return ""
		}
	}
	return ""
}
