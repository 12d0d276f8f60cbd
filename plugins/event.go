package plugins

import (
	"reflect"

	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/agent/session"
)

// CheckEventReplacement is the runtime's check on an on_event Amend or
// Return: the replacement must keep the original's id, invocation id,
// author, actions (state delta, transfer, escalate), workflow notice (the
// event's continuation), partial/final flags and content kind — the same
// part kinds in the same order, with tool calls and tool results unchanged,
// so only text can be rewritten. When finalValidated is true (the event is
// final and its content already passed output-schema validation) the content
// cannot change at all. A violation is an invalid_event_replacement_identity
// *Error whose Reason names the first field that changed.
func CheckEventReplacement(orig, repl *session.Event, finalValidated bool) error {
	bad := func(field string) error {
		return &Error{Code: CodeInvalidEventReplacement, Hook: HookOnEvent, Reason: field}
	}
	switch {
	case repl == nil:
		return bad("event")
	case repl.ID != orig.ID:
		return bad("id")
	case repl.InvocationID != orig.InvocationID:
		return bad("invocation_id")
	case repl.Author != orig.Author:
		return bad("author")
	case !reflect.DeepEqual(repl.Actions, orig.Actions):
		return bad("actions")
	case !reflect.DeepEqual(repl.Workflow, orig.Workflow):
		return bad("workflow")
	case repl.Partial != orig.Partial:
		return bad("partial")
	case repl.Final != orig.Final:
		return bad("final")
	case !sameContentKind(orig.Content, repl.Content):
		return bad("content_kind")
	case finalValidated && orig.Final && !reflect.DeepEqual(orig.Content, repl.Content):
		return bad("final_content")
	}
	return nil
}

func sameContentKind(a, b *model.Message) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Role != b.Role || len(a.Parts) != len(b.Parts) {
		return false
	}
	for i := range a.Parts {
		pa, pb := a.Parts[i], b.Parts[i]
		if (pa.ToolCall == nil) != (pb.ToolCall == nil) || (pa.ToolResult == nil) != (pb.ToolResult == nil) {
			return false
		}
		if !reflect.DeepEqual(pa.ToolCall, pb.ToolCall) || !reflect.DeepEqual(pa.ToolResult, pb.ToolResult) {
			return false
		}
	}
	return true
}
