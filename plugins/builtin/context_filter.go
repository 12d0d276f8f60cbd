package builtin

import (
	"context"
	"fmt"
	"slices"

	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/plugins"
)

// ContextFilter bounds the history sent to the model (before_model, amend).
// Config: max_messages (integer ≥ 1 or "infinity", default infinity),
// include_roles (list or "all", default all), exclude_roles (list, default
// none), preserve_system (default true), preserve_latest_user (default
// true). Roles are system, user, model and tool; "agent" and "assistant"
// mean model.
//
// Messages whose role passes include/exclude are candidates; the limit keeps
// the most recent max_messages candidates. System messages are kept apart
// from the limit when preserve_system is set, and the latest user message is
// re-added when preserve_latest_user is set. Tool results whose call was
// dropped are dropped too, so a provider never sees an orphaned result. Order
// is always the original order. (The contract keeps "the first N" of a
// newest-first memory list; our Messages are oldest-first, so the same intent
// is "the last N".)
type ContextFilter struct {
	max                int // 0 = infinity
	include, exclude   []model.Role
	preserveSystem     bool
	preserveLatestUser bool
}

// NewContextFilter validates config and returns the plugin.
func NewContextFilter(config map[string]any) (*ContextFilter, error) {
	c := newConfig(ContextFilterName, config,
		"max_messages", "include_roles", "exclude_roles", "preserve_system", "preserve_latest_user")
	f := &ContextFilter{
		preserveSystem:     c.boolean("preserve_system", true),
		preserveLatestUser: c.boolean("preserve_latest_user", true),
	}
	if v, ok := config["max_messages"]; ok && v != "infinity" {
		f.max = c.integer("max_messages", 0, 1, 1<<30)
	}
	if v, ok := config["include_roles"]; ok && v != "all" {
		f.include = roles(c, "include_roles")
		if len(f.include) == 0 {
			c.fail("include_roles: want a non-empty list or \"all\"")
		}
	}
	f.exclude = roles(c, "exclude_roles")
	return f, c.err
}

func roles(c *config, key string) []model.Role {
	names, _ := c.strings(key)
	out := make([]model.Role, 0, len(names))
	for _, n := range names {
		switch n {
		case "system", "user", "model", "tool":
			out = append(out, model.Role(n))
		case "agent", "assistant":
			out = append(out, model.RoleModel)
		default:
			c.fail(fmt.Sprintf("%s: unknown role %q", key, n))
		}
	}
	return out
}

// Hooks implements plugins.Plugin.
func (f *ContextFilter) Hooks() plugins.Hooks {
	return plugins.Hooks{BeforeModel: f.beforeModel}
}

func (f *ContextFilter) beforeModel(_ context.Context, _ plugins.CallContext, req *model.Request, _ map[string]any) (plugins.Outcome, error) {
	msgs := req.Messages
	keep := make([]bool, len(msgs))
	var candidates []int
	for i, m := range msgs {
		switch {
		case m.Role == model.RoleSystem && f.preserveSystem:
			keep[i] = true
		case f.include != nil && !slices.Contains(f.include, m.Role):
		case slices.Contains(f.exclude, m.Role):
		default:
			candidates = append(candidates, i)
		}
	}
	if f.max > 0 && len(candidates) > f.max {
		candidates = candidates[len(candidates)-f.max:]
	}
	for _, i := range candidates {
		keep[i] = true
	}
	if f.preserveLatestUser {
		for i := len(msgs) - 1; i >= 0; i-- {
			if msgs[i].Role == model.RoleUser {
				keep[i] = true
				break
			}
		}
	}
	dropOrphanToolResults(msgs, keep)
	if !slices.Contains(keep, false) {
		return plugins.Observe(), nil
	}
	out := make([]model.Message, 0, len(msgs))
	for i, m := range msgs {
		if keep[i] {
			out = append(out, m)
		}
	}
	req.Messages = out
	return plugins.Amend(req), nil
}

// dropOrphanToolResults unmarks tool-result messages none of whose results
// answers a kept tool call.
func dropOrphanToolResults(msgs []model.Message, keep []bool) {
	calls := map[string]bool{}
	for i, m := range msgs {
		if keep[i] {
			for _, c := range m.ToolCalls() {
				calls[c.ID] = true
			}
		}
	}
	for i, m := range msgs {
		if !keep[i] || m.Role != model.RoleTool {
			continue
		}
		answered := false
		for _, p := range m.Parts {
			answered = answered || (p.ToolResult != nil && calls[p.ToolResult.ID])
		}
		if !answered {
			keep[i] = false
		}
	}
}
