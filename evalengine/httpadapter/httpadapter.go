package httpadapter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/fadcedab/adk/evalengine"
	"github.com/fadcedab/adk/internal/jsonlimit"
)

// Error tags (see the package doc).
const (
	TagUnavailable      = "http_adapter_unavailable"
	TagStatus           = "http_adapter_status"
	TagResponseTooLarge = "http_adapter_response_too_large"
)

// Defaults and bounds.
const (
	DefaultTimeout          = 120 * time.Second
	DefaultMaxResponseBytes = 1 << 20
	MaxResponseBytes        = 16 << 20
)

// ErrInvalidConfig is returned by New for a bad URL or bound.
var ErrInvalidConfig = errors.New("httpadapter: invalid config")

// Config configures the adapter.
type Config struct {
	// URL is the agent's endpoint, http or https.
	URL string
	// Timeout bounds one request; default 120 s. The sample's own deadline
	// applies as well.
	Timeout time.Duration
	// MaxResponseBytes bounds a response body; default 1 MiB, at most 16 MiB.
	MaxResponseBytes int
	// Client is the HTTP client; default a new client without a global
	// timeout (the per-request context bounds each call).
	Client *http.Client
	// Header is added to every request (e.g. authorization). Its values
	// never appear in results or errors.
	Header http.Header
}

// Adapter posts turns to an HTTP endpoint.
type Adapter struct {
	cfg Config
}

// New validates cfg and returns the adapter.
func New(cfg Config) (*Adapter, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: url", ErrInvalidConfig)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("%w: timeout", ErrInvalidConfig)
	}
	if cfg.MaxResponseBytes == 0 {
		cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if cfg.MaxResponseBytes < 0 || cfg.MaxResponseBytes > MaxResponseBytes {
		return nil, fmt.Errorf("%w: max_response_bytes", ErrInvalidConfig)
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	return &Adapter{cfg: cfg}, nil
}

// NewSession starts a session for one (case, sample); it holds no
// connection of its own.
func (a *Adapter) NewSession(_ context.Context, info evalengine.SampleInfo) (evalengine.Session, error) {
	return &session{a: a, id: info.SampleID}, nil
}

type session struct {
	a  *Adapter
	id string
}

type request struct {
	CaseID    string `json:"case_id"`
	SampleID  string `json:"sample_id"`
	TurnID    string `json:"turn_id"`
	TurnIndex int    `json:"turn_index"`
	Input     any    `json:"input"`
	SessionID string `json:"session_id"`
}

var responseKeys = map[string]bool{"output": true, "events": true, "metadata": true}

func tagErr(tag string, cause error) error { return &evalengine.AdapterError{Tag: tag, Err: cause} }

// Turn posts one turn and decodes the answer.
func (s *session) Turn(ctx context.Context, in evalengine.TurnInput) (evalengine.TurnOutput, error) {
	body, err := json.Marshal(request{CaseID: in.CaseID, SampleID: in.SampleID, TurnID: in.TurnID, TurnIndex: in.TurnIndex, Input: in.Input, SessionID: s.id})
	if err != nil {
		return evalengine.TurnOutput{}, tagErr(evalengine.TagInvalidAdapterResult, err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.a.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.a.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return evalengine.TurnOutput{}, tagErr(TagUnavailable, err)
	}
	for k, vs := range s.a.cfg.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.a.cfg.Client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return evalengine.TurnOutput{}, tagErr(evalengine.TagTimeout, err)
		}
		return evalengine.TurnOutput{}, tagErr(TagUnavailable, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, int64(s.a.cfg.MaxResponseBytes)+1))
	if err != nil {
		if ctx.Err() != nil {
			return evalengine.TurnOutput{}, tagErr(evalengine.TagTimeout, err)
		}
		return evalengine.TurnOutput{}, tagErr(TagUnavailable, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return evalengine.TurnOutput{}, tagErr(TagStatus, fmt.Errorf("status %d", resp.StatusCode))
	}
	if len(data) > s.a.cfg.MaxResponseBytes {
		return evalengine.TurnOutput{}, tagErr(TagResponseTooLarge, nil)
	}
	return decodeResponse(data)
}

func decodeResponse(data []byte) (evalengine.TurnOutput, error) {
	invalid := func(cause error) (evalengine.TurnOutput, error) {
		return evalengine.TurnOutput{}, tagErr(evalengine.TagInvalidAdapterResult, cause)
	}
	v, err := jsonlimit.Decode(data, jsonlimit.Limits{})
	if err != nil {
		return invalid(err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return invalid(nil)
	}
	for k := range m {
		if !responseKeys[k] {
			return invalid(nil)
		}
	}
	output, ok := m["output"]
	if !ok {
		return invalid(nil)
	}
	out := evalengine.TurnOutput{Output: output}
	if ev, present := m["events"]; present && ev != nil {
		l, ok := ev.([]any)
		if !ok {
			return evalengine.TurnOutput{}, tagErr(evalengine.TagInvalidAdapterEvents, nil)
		}
		out.Events = l
		if out.Trajectory, err = evalengine.TrajectoryFromEvents(l); err != nil {
			return evalengine.TurnOutput{}, err
		}
	}
	if md, present := m["metadata"]; present && md != nil {
		obj, ok := md.(map[string]any)
		if !ok {
			return invalid(nil)
		}
		out.Metadata = obj
	}
	return out, nil
}

// Close ends the session; the protocol has no teardown call.
func (s *session) Close() error { return nil }
