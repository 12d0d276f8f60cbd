package builtin

import (
	"context"

	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/plugins"
)

// GlobalInstruction adds a Runner-wide instruction to every model request
// (before_model, amend). Config: instruction (required, 1..65 536 bytes of
// UTF-8), position prepend|append (default prepend), separator (≤ 16 bytes,
// default two newlines).
//
// The instruction is merged into the text of the first system message that
// has text (before its first text part, or after its last); a request
// without one gets a new system message at the front. (The contract appends
// the new message to its memory list; our Messages are oldest-first, and a
// system message belongs at the start.)
type GlobalInstruction struct {
	instruction, separator string
	appendAt               bool
}

// NewGlobalInstruction validates config and returns the plugin.
func NewGlobalInstruction(config map[string]any) (*GlobalInstruction, error) {
	c := newConfig(GlobalInstructionName, config, "instruction", "position", "separator")
	g := &GlobalInstruction{
		instruction: c.str("instruction", "", 1, 65_536),
		separator:   c.str("separator", "\n\n", 0, 16),
		appendAt:    c.oneOf("position", "prepend", "prepend", "append") == "append",
	}
	if _, ok := config["instruction"]; !ok {
		c.fail("instruction: required")
	}
	return g, c.err
}

// Hooks implements plugins.Plugin.
func (g *GlobalInstruction) Hooks() plugins.Hooks {
	return plugins.Hooks{BeforeModel: g.beforeModel}
}

func (g *GlobalInstruction) beforeModel(_ context.Context, _ plugins.CallContext, req *model.Request, _ map[string]any) (plugins.Outcome, error) {
	// req is the pipeline's private copy: editing it in place is safe.
	for i := range req.Messages {
		m := &req.Messages[i]
		if m.Role != model.RoleSystem {
			continue
		}
		first, last := -1, -1
		for j, p := range m.Parts {
			if p.ToolCall == nil && p.ToolResult == nil {
				if first < 0 {
					first = j
				}
				last = j
			}
		}
		if first < 0 {
			continue
		}
		if g.appendAt {
			m.Parts[last].Text += g.separator + g.instruction
		} else {
			m.Parts[first].Text = g.instruction + g.separator + m.Parts[first].Text
		}
		return plugins.Amend(req), nil
	}
	sys := model.Message{Role: model.RoleSystem, Parts: []model.Part{{Text: g.instruction}}}
	req.Messages = append([]model.Message{sys}, req.Messages...)
	return plugins.Amend(req), nil
}
