package openai

import (
	"encoding/json"
	"strconv"

	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/internal/jsonquote"
)

// encode writes the chat completions request for req: the bytes
// json.Marshal gives for the chatRequest the provider would build (its
// fields in order, omitempty kept), written straight from req. Every
// model call of an eval run goes through here, and marshaling that struct
// by reflection, with its slice of messages and a boxed string for each
// message's content, was ~2.5% of a sample's CPU against a local server.
// Strings are escaped as encoding/json escapes them (appendString); map
// values (tool call arguments, tool parameters, the output schema, tool
// results) and the temperature are still marshaled by encoding/json, so
// their bytes are its own. TestEncode_IsEncodingJSONs holds the whole to
// json.Marshal of chatRequest.
func (p *Provider) encode(req *model.Request) ([]byte, error) {
	name := p.cfg.Model
	if req.Model != "" {
		name = req.Model
	}
	temp := p.cfg.Temperature
	if req.Temperature != nil {
		temp = req.Temperature
	}
	maxTokens := p.cfg.MaxOutputTokens
	if req.MaxOutputTokens > 0 {
		maxTokens = req.MaxOutputTokens
	}
	maxCompletion := 0
	if p.completionTokens(name) {
		maxCompletion, maxTokens = maxTokens, 0
	}
	// Room for the common request (texts only) in one allocation:
	// `{"model":,"messages":[]}` and `{"role":"system","content":""},`
	// are each under 32 bytes.
	n := 32 + len(name)
	for i := range req.Messages {
		n += 32
		for j := range req.Messages[i].Parts {
			n += len(req.Messages[i].Parts[j].Text)
		}
	}
	b := make([]byte, 0, n)
	b = append(b, `{"model":`...)
	b = appendString(b, name)
	b = append(b, `,"messages":`...)
	var err error
	if b, err = appendMessages(b, req.Messages); err != nil {
		return nil, err
	}
	if len(req.Tools) > 0 {
		b = append(b, `,"tools":[`...)
		for i := range req.Tools {
			if i > 0 {
				b = append(b, ',')
			}
			d := &req.Tools[i]
			b = append(b, `{"type":"function","function":{"name":`...)
			b = appendString(b, d.Name)
			if d.Description != "" {
				b = append(b, `,"description":`...)
				b = appendString(b, d.Description)
			}
			params := d.Parameters
			if params == nil {
				params = map[string]any{"type": "object", "properties": map[string]any{}}
			}
			if len(params) > 0 {
				b = append(b, `,"parameters":`...)
				if b, err = appendMarshal(b, params); err != nil {
					return nil, err
				}
			}
			b = append(b, "}}"...)
		}
		b = append(b, ']')
	}
	if req.OutputSchema != nil {
		b = append(b, `,"response_format":{"type":"json_schema","json_schema":{"name":"output","schema":`...)
		if b, err = appendMarshal(b, req.OutputSchema); err != nil {
			return nil, err
		}
		b = append(b, "}}"...)
	}
	if temp != nil {
		b = append(b, `,"temperature":`...)
		if b, err = appendMarshal(b, *temp); err != nil {
			return nil, err
		}
	}
	if maxTokens != 0 {
		b = append(b, `,"max_tokens":`...)
		b = strconv.AppendInt(b, int64(maxTokens), 10)
	}
	if maxCompletion != 0 {
		b = append(b, `,"max_completion_tokens":`...)
		b = strconv.AppendInt(b, int64(maxCompletion), 10)
	}
	return append(b, '}'), nil
}

// appendMessages writes the request's messages array, null when none of
// msgs becomes a chat message: system and user messages as their text,
// model messages as assistant messages (text, or null, and tool calls),
// each tool result as a tool message; other roles are left out.
func appendMessages(b []byte, msgs []model.Message) ([]byte, error) {
	start := len(b)
	b = append(b, '[')
	first := true // no message written yet
	for i := range msgs {
		m := &msgs[i]
		switch m.Role {
		case model.RoleSystem, model.RoleUser:
			if !first {
				b = append(b, ',')
			}
			first = false
			b = append(b, `{"role":`...)
			b = appendString(b, string(m.Role))
			b = append(b, `,"content":`...)
			b = appendString(b, m.Text())
			b = append(b, '}')
		case model.RoleModel:
			if !first {
				b = append(b, ',')
			}
			first = false
			b = append(b, `{"role":"assistant","content":`...)
			if t := m.Text(); t != "" {
				b = appendString(b, t)
			} else {
				b = append(b, "null"...)
			}
			calls := 0
			for j := range m.Parts {
				tc := m.Parts[j].ToolCall
				if tc == nil {
					continue
				}
				args, err := json.Marshal(nonNil(tc.Args))
				if err != nil {
					return nil, err
				}
				if calls == 0 {
					b = append(b, `,"tool_calls":[`...)
				} else {
					b = append(b, ',')
				}
				calls++
				b = append(b, `{"id":`...)
				b = appendString(b, tc.ID)
				b = append(b, `,"type":"function","function":{"name":`...)
				b = appendString(b, tc.Name)
				b = append(b, `,"arguments":`...)
				b = appendString(b, string(args))
				b = append(b, "}}"...)
			}
			if calls > 0 {
				b = append(b, ']')
			}
			b = append(b, '}')
		case model.RoleTool:
			for j := range m.Parts {
				r := m.Parts[j].ToolResult
				if r == nil {
					continue
				}
				content, err := toolContent(r)
				if err != nil {
					return nil, err
				}
				if !first {
					b = append(b, ',')
				}
				first = false
				b = append(b, `{"role":"tool","content":`...)
				b = appendString(b, content)
				if r.ID != "" {
					b = append(b, `,"tool_call_id":`...)
					b = appendString(b, r.ID)
				}
				b = append(b, '}')
			}
		}
	}
	if first {
		return append(b[:start], "null"...), nil
	}
	return append(b, ']'), nil
}

// appendMarshal appends v's encoding/json encoding.
func appendMarshal(b []byte, v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, data...), nil
}

// appendString appends s as a JSON string exactly as json.Marshal writes
// it (HTML escaping on), through the module's one quoter.
func appendString(b []byte, s string) []byte { return jsonquote.Append(b, s, jsonquote.HTML) }
