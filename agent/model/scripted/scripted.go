package scripted

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/fadcedab/adk/agent/model"
)

// Error codes of the scripted provider (model.Error.Code).
const (
	CodeScriptExhausted = "script_exhausted"
	CodeNoMatchingRule  = "no_matching_rule"
)

// ProviderName is the provider's gen_ai.provider.name.
const ProviderName = "scripted"

// maxLatency bounds latency_ms so a typo cannot park a run for hours.
const maxLatency = 10 * time.Minute

// Config is the scripted model configuration from AGENT.json.
type Config struct {
	Provider  string       `json:"provider"`
	Rules     []Rule       `json:"rules,omitempty"`
	Default   *Script      `json:"default,omitempty"`
	LatencyMS int          `json:"latency_ms,omitempty"`
	Usage     *model.Usage `json:"usage,omitempty"`
}

// Rule pairs a match on the latest user message with a script.
type Rule struct {
	Match Match  `json:"match"`
	Steps []Step `json:"steps"`
}

// Match selects a rule. Exactly one field is set.
type Match struct {
	Contains *string `json:"contains,omitempty"`
	Equals   *string `json:"equals,omitempty"`
	Regex    *string `json:"regex,omitempty"`
}

// Script is the steps of the default rule.
type Script struct {
	Steps []Step `json:"steps"`
}

// Step is one model answer: final text or tool calls.
type Step struct {
	Text      *string    `json:"text,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
}

// ToolCall is a scripted tool call.
type ToolCall struct {
	Name string         `json:"name"`
	Args map[string]any `json:"args,omitempty"`
}

// Provider is the scripted model.Provider.
type Provider struct {
	rules   []compiledRule
	def     []model.Response // nil when there is no default
	hasDef  bool
	latency time.Duration
}

type compiledRule struct {
	contains, equals *string
	re               *regexp.Regexp
	steps            []model.Response
}

// Parse decodes a scripted model configuration (unknown keys are errors) and
// builds the provider.
func Parse(raw []byte) (*Provider, error) {
	var cfg Config
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("scripted config: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("scripted config: trailing data")
	}
	return New(cfg)
}

// New validates cfg, compiles its regular expressions and precomputes every
// response, so that Generate does no parsing.
func New(cfg Config) (*Provider, error) {
	if cfg.Provider != "" && cfg.Provider != ProviderName {
		return nil, fmt.Errorf("scripted config: provider %q", cfg.Provider)
	}
	if cfg.LatencyMS < 0 || time.Duration(cfg.LatencyMS)*time.Millisecond > maxLatency {
		return nil, fmt.Errorf("scripted config: latency_ms %d out of range 0..%d", cfg.LatencyMS, maxLatency.Milliseconds())
	}
	var usage model.Usage
	if cfg.Usage != nil {
		if cfg.Usage.InputTokens < 0 || cfg.Usage.OutputTokens < 0 {
			return nil, fmt.Errorf("scripted config: negative usage")
		}
		usage = *cfg.Usage
	}
	p := &Provider{latency: time.Duration(cfg.LatencyMS) * time.Millisecond}
	for i, r := range cfg.Rules {
		cr := compiledRule{}
		set := 0
		if r.Match.Contains != nil {
			cr.contains = r.Match.Contains
			set++
		}
		if r.Match.Equals != nil {
			cr.equals = r.Match.Equals
			set++
		}
		if r.Match.Regex != nil {
			re, err := regexp.Compile(*r.Match.Regex)
			if err != nil {
				return nil, fmt.Errorf("scripted config: rule %d: regex: %w", i, err)
			}
			cr.re = re
			set++
		}
		if set != 1 {
			return nil, fmt.Errorf("scripted config: rule %d: match needs exactly one of contains, equals, regex", i)
		}
		steps, err := compileSteps(r.Steps, usage)
		if err != nil {
			return nil, fmt.Errorf("scripted config: rule %d: %w", i, err)
		}
		cr.steps = steps
		p.rules = append(p.rules, cr)
	}
	if cfg.Default != nil {
		steps, err := compileSteps(cfg.Default.Steps, usage)
		if err != nil {
			return nil, fmt.Errorf("scripted config: default: %w", err)
		}
		p.def, p.hasDef = steps, true
	}
	return p, nil
}

func compileSteps(steps []Step, usage model.Usage) ([]model.Response, error) {
	if len(steps) == 0 {
		return nil, fmt.Errorf("no steps")
	}
	out := make([]model.Response, len(steps))
	for k, s := range steps {
		switch {
		case s.Text != nil && len(s.ToolCalls) == 0:
			out[k] = model.Response{
				Message:      model.Message{Role: model.RoleModel, Parts: []model.Part{{Text: *s.Text}}},
				FinishReason: "stop",
			}
		case s.Text == nil && len(s.ToolCalls) > 0:
			parts := make([]model.Part, len(s.ToolCalls))
			for j, tc := range s.ToolCalls {
				if tc.Name == "" {
					return nil, fmt.Errorf("step %d: tool call %d: empty name", k, j)
				}
				args := tc.Args
				if args == nil {
					args = map[string]any{}
				}
				parts[j] = model.Part{ToolCall: &model.ToolCall{
					ID:   "call_" + strconv.Itoa(k) + "_" + strconv.Itoa(j),
					Name: tc.Name,
					Args: args,
				}}
			}
			out[k] = model.Response{
				Message:      model.Message{Role: model.RoleModel, Parts: parts},
				FinishReason: "tool_calls",
			}
		default:
			return nil, fmt.Errorf("step %d: needs exactly one of text, tool_calls", k)
		}
		out[k].Usage = usage
		out[k].Model = ProviderName
	}
	return out, nil
}

// Name reports "scripted".
func (p *Provider) Name() string { return ProviderName }

// Generate answers from the script. The returned response is a fresh copy
// (tool-call args are shared and must be treated as read-only).
func (p *Provider) Generate(ctx context.Context, req *model.Request) (*model.Response, error) {
	if p.latency > 0 {
		t := time.NewTimer(p.latency)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctxError(ctx)
		case <-t.C:
		}
	} else if ctx.Err() != nil {
		return nil, ctxError(ctx)
	}
	user, k := latestUser(req)
	steps := p.def
	found := p.hasDef
	for i := range p.rules {
		if p.rules[i].matches(user) {
			steps, found = p.rules[i].steps, true
			break
		}
	}
	if !found {
		return nil, &model.Error{Provider: ProviderName, Class: model.ClassScript, Code: CodeNoMatchingRule}
	}
	if k >= len(steps) {
		return nil, &model.Error{Provider: ProviderName, Class: model.ClassScript, Code: CodeScriptExhausted}
	}
	resp := steps[k]
	resp.Message.Parts = append([]model.Part(nil), resp.Message.Parts...)
	for j := range resp.Message.Parts {
		if tc := resp.Message.Parts[j].ToolCall; tc != nil {
			c := *tc
			resp.Message.Parts[j].ToolCall = &c
		}
	}
	return &resp, nil
}

func (r *compiledRule) matches(s string) bool {
	switch {
	case r.contains != nil:
		return strings.Contains(s, *r.contains)
	case r.equals != nil:
		return s == *r.equals
	default:
		return r.re.MatchString(s)
	}
}

// latestUser returns the text of the last user message and the number of
// model messages after it.
func latestUser(req *model.Request) (string, int) {
	if req == nil {
		return "", 0
	}
	k := 0
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := &req.Messages[i]
		switch m.Role {
		case model.RoleUser:
			return m.Text(), k
		case model.RoleModel:
			k++
		}
	}
	return "", k
}

func ctxError(ctx context.Context) error {
	if ctx.Err() == context.DeadlineExceeded {
		return &model.Error{Provider: ProviderName, Class: model.ClassTimeout}
	}
	return &model.Error{Provider: ProviderName, Class: model.ClassCancelled}
}
