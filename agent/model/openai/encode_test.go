package openai

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/fadcedab/adk/agent/model"
)

// encodeWithEncodingJSON is the request encoder encode replaced: the
// chatRequest built and marshaled by encoding/json. encode must give its
// bytes, and fail where it fails.
func (p *Provider) encodeWithEncodingJSON(req *model.Request) ([]byte, error) {
	cr := chatRequest{Model: p.cfg.Model, Temperature: p.cfg.Temperature, MaxTokens: p.cfg.MaxOutputTokens}
	if req.Model != "" {
		cr.Model = req.Model
	}
	if req.Temperature != nil {
		cr.Temperature = req.Temperature
	}
	if req.MaxOutputTokens > 0 {
		cr.MaxTokens = req.MaxOutputTokens
	}
	if p.completionTokens(cr.Model) {
		cr.MaxCompletionTokens, cr.MaxTokens = cr.MaxTokens, 0
	}
	if len(req.Messages) > 0 {
		cr.Messages = make([]chatMessage, 0, len(req.Messages))
	}
	for _, m := range req.Messages {
		switch m.Role {
		case model.RoleSystem, model.RoleUser:
			t := m.Text()
			cr.Messages = append(cr.Messages, chatMessage{Role: string(m.Role), Content: &t})
		case model.RoleModel:
			cm := chatMessage{Role: "assistant"}
			if t := m.Text(); t != "" {
				cm.Content = &t
			}
			for _, tc := range m.ToolCalls() {
				args, err := json.Marshal(nonNil(tc.Args))
				if err != nil {
					return nil, err
				}
				c := chatToolCall{ID: tc.ID, Type: "function"}
				c.Function.Name, c.Function.Arguments = tc.Name, string(args)
				cm.ToolCalls = append(cm.ToolCalls, c)
			}
			cr.Messages = append(cr.Messages, cm)
		case model.RoleTool:
			for _, part := range m.Parts {
				if part.ToolResult == nil {
					continue
				}
				content, err := toolContent(part.ToolResult)
				if err != nil {
					return nil, err
				}
				cr.Messages = append(cr.Messages, chatMessage{Role: "tool", Content: &content, ToolCallID: part.ToolResult.ID})
			}
		}
	}
	if len(cr.Messages) == 0 {
		cr.Messages = nil // "messages":null, as before the room above
	}
	for _, d := range req.Tools {
		params := d.Parameters
		if params == nil {
			params = map[string]any{"type": "object", "properties": map[string]any{}}
		}
		cr.Tools = append(cr.Tools, chatTool{Type: "function", Function: chatFunction{Name: d.Name, Description: d.Description, Parameters: params}})
	}
	if req.OutputSchema != nil {
		rf := &responseFormat{Type: "json_schema"}
		rf.JSONSchema.Name, rf.JSONSchema.Schema = "output", req.OutputSchema
		cr.ResponseFormat = rf
	}
	return json.Marshal(cr)
}

// encodeCases are requests of every shape encode writes.
func encodeCases() map[string]*model.Request {
	temp := 0.25
	return map[string]*model.Request{
		"empty":            {},
		"no chat messages": {Messages: []model.Message{{Role: "other", Parts: []model.Part{{Text: "x"}}}}},
		"system and user":  {Messages: []model.Message{{Role: model.RoleSystem, Parts: []model.Part{{Text: "Answer briefly."}}}, {Role: model.RoleUser, Parts: []model.Part{{Text: "hello"}}}}},
		"empty user text":  {Messages: []model.Message{{Role: model.RoleUser}}},
		"tools and calls":  request(),
		"escapes":          {Messages: []model.Message{{Role: model.RoleUser, Parts: []model.Part{{Text: "a\"b\\c\n\r\t\b\f\x00\x1f<>&\u2028\u2029\xff\xc3é😀"}, {Text: " second part"}}}}},
		"model text":       {Messages: []model.Message{{Role: model.RoleModel, Parts: []model.Part{{Text: "I <think>"}}}}},
		"model empty":      {Messages: []model.Message{{Role: model.RoleModel}}},
		"model text+calls": {Messages: []model.Message{{Role: model.RoleModel, Parts: []model.Part{{Text: "t"}, {ToolCall: &model.ToolCall{Name: "a", Args: nil}}, {ToolCall: &model.ToolCall{ID: "c2", Name: "b&", Args: map[string]any{"x": []any{1.5, "<y>", nil, true}}}}}}}},
		"tool results":     {Messages: []model.Message{{Role: model.RoleTool, Parts: []model.Part{{Text: "ignored"}, {ToolResult: &model.ToolResult{Name: "a", Result: "r"}}, {ToolResult: &model.ToolResult{ID: "c2", Name: "b", Error: "it <failed>"}}}}}},
		"tool only text":   {Messages: []model.Message{{Role: model.RoleTool, Parts: []model.Part{{Text: "no result"}}}}},
		"tools":            {Tools: []model.ToolDeclaration{{Name: "a"}, {Name: "b", Description: "d<", Parameters: map[string]any{}}, {Name: "c", Parameters: map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}}}}},
		"output schema":    {OutputSchema: map[string]any{"type": "object", "required": []any{"a"}}},
		"temperature":      {Temperature: &temp, Messages: []model.Message{{Role: model.RoleUser, Parts: []model.Part{{Text: "q"}}}}},
		"tiny temperature": {Temperature: func() *float64 { f := 1e-7; return &f }()},
		"max tokens":       {MaxOutputTokens: 77},
		"model override":   {Model: "o3-mini", MaxOutputTokens: 5},
		"gpt-5 no bound":   {Model: "gpt-5"},
		"unicode model":    {Model: "m\u2028<é>"},
	}
}

func TestEncode_IsEncodingJSONs(t *testing.T) {
	temp := 0.7
	configs := map[string]Config{
		"plain":      {Model: "gpt-test"},
		"bounded":    {Model: "gpt-test", MaxOutputTokens: 100, Temperature: &temp},
		"completion": {Model: "gpt-test", MaxOutputTokens: 100, MaxTokensParam: ParamMaxCompletionTokens},
		"max tokens": {Model: "o1", MaxOutputTokens: 9, MaxTokensParam: ParamMaxTokens},
	}
	for cname, cfg := range configs {
		p := &Provider{cfg: cfg}
		for name, req := range encodeCases() {
			t.Run(cname+"/"+name, func(t *testing.T) {
				want, werr := p.encodeWithEncodingJSON(req)
				got, gerr := p.encode(req)
				if (werr != nil) != (gerr != nil) || !bytes.Equal(got, want) {
					t.Fatalf("encode:\n got %s (%v)\nwant %s (%v)", got, gerr, want, werr)
				}
			})
		}
	}
}

func TestEncode_FailsWhereEncodingJSONFails(t *testing.T) {
	p := &Provider{cfg: Config{Model: "m"}}
	nan := math.NaN()
	for name, req := range map[string]*model.Request{
		"args":        {Messages: []model.Message{{Role: model.RoleModel, Parts: []model.Part{{ToolCall: &model.ToolCall{Name: "a", Args: map[string]any{"x": math.Inf(1)}}}}}}},
		"tool result": {Messages: []model.Message{{Role: model.RoleTool, Parts: []model.Part{{ToolResult: &model.ToolResult{Name: "a", Result: make(chan int)}}}}}},
		"parameters":  {Tools: []model.ToolDeclaration{{Name: "a", Parameters: map[string]any{"x": nan}}}},
		"schema":      {OutputSchema: map[string]any{"x": func() {}}},
		"temperature": {Temperature: &nan},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := p.encodeWithEncodingJSON(req); err == nil {
				t.Fatal("the old encoder took it")
			}
			if b, err := p.encode(req); err == nil {
				t.Fatalf("encode took it: %s", b)
			}
		})
	}
}

// FuzzEncode holds encode to encoding/json for fuzzed texts, names and
// bounds in every message role.
func FuzzEncode(f *testing.F) {
	f.Add("Answer briefly.", "hello", "gpt-x", "c1", 0)
	f.Add("<&>\u2028", "\xff\xfe\x00", "o1", "", 12)
	f.Add("", "é😀\"\\", "", "id\t", -3)
	f.Fuzz(func(t *testing.T, sys, user, name, id string, n int) {
		p := &Provider{cfg: Config{Model: "m"}}
		req := &model.Request{
			Model:           name,
			MaxOutputTokens: n,
			Messages: []model.Message{
				{Role: model.RoleSystem, Parts: []model.Part{{Text: sys}}},
				{Role: model.RoleUser, Parts: []model.Part{{Text: user}, {Text: sys}}},
				{Role: model.RoleModel, Parts: []model.Part{{Text: user}, {ToolCall: &model.ToolCall{ID: id, Name: name, Args: map[string]any{sys: user}}}}},
				{Role: model.RoleTool, Parts: []model.Part{{ToolResult: &model.ToolResult{ID: id, Name: name, Result: user}}}},
			},
			Tools: []model.ToolDeclaration{{Name: name, Description: sys}},
		}
		want, werr := p.encodeWithEncodingJSON(req)
		got, gerr := p.encode(req)
		if (werr != nil) != (gerr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("encode:\n got %q (%v)\nwant %q (%v)", got, gerr, want, werr)
		}
		s, _ := json.Marshal(user)
		if g := appendString(nil, user); !bytes.Equal(g, s) {
			t.Fatalf("appendString(%q) = %s, encoding/json %s", user, g, s)
		}
	})
}

// BenchmarkEncode is one eval sample's request (an instruction and the
// user's text): "encode" as every call writes it, "encoding-json" as the
// struct marshaled by encoding/json did.
func BenchmarkEncode(b *testing.B) {
	p := &Provider{cfg: Config{Model: "fake"}}
	req := encodeCases()["system and user"]
	for name, enc := range map[string]func(*model.Request) ([]byte, error){"encode": p.encode, "encoding-json": p.encodeWithEncodingJSON} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := enc(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
