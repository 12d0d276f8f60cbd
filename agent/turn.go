package agent

import (
	"context"

	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/agent/session"
)

// TurnResult is a collected turn: everything Run yielded, plus the views an
// evaluator wants.
type TurnResult struct {
	InvocationID string
	// Events are the yielded events, in order.
	Events []*session.Event
	// Final is the content of the last final event (nil if none), and
	// FinalText its text.
	Final     *model.Message
	FinalText string
	// ToolCalls is the tool-call trajectory in call order, with results.
	ToolCalls []ToolCallRecord
	// Usage sums the usage of every model event.
	Usage model.Usage
}

// ToolCallRecord is one tool call of a turn and its result.
type ToolCallRecord struct {
	Agent  string         `json:"agent"`
	ID     string         `json:"id"`
	Name   string         `json:"name"`
	Args   map[string]any `json:"args"`
	Result any            `json:"result,omitempty"`
	Error  string         `json:"error,omitempty"`
}

// RunTurn runs one turn to completion and collects it. On failure it
// returns what was collected so far together with the error.
func (r *Runner) RunTurn(ctx context.Context, req RunRequest) (*TurnResult, error) {
	tr := &TurnResult{}
	index := map[string]int{}
	for ev, err := range r.Run(ctx, req) {
		if err != nil {
			return tr, err
		}
		tr.add(ev, index)
	}
	return tr, nil
}

func (tr *TurnResult) add(ev *session.Event, index map[string]int) {
	tr.Events = append(tr.Events, ev)
	tr.InvocationID = ev.InvocationID
	if ev.Usage != nil {
		tr.Usage.InputTokens += ev.Usage.InputTokens
		tr.Usage.OutputTokens += ev.Usage.OutputTokens
		tr.Usage.CacheReadTokens += ev.Usage.CacheReadTokens
		tr.Usage.CacheCreationTokens += ev.Usage.CacheCreationTokens
	}
	if ev.Content == nil {
		return
	}
	for _, p := range ev.Content.Parts {
		switch {
		case p.ToolCall != nil:
			index[ev.Author+"\x00"+p.ToolCall.ID] = len(tr.ToolCalls)
			tr.ToolCalls = append(tr.ToolCalls, ToolCallRecord{Agent: ev.Author, ID: p.ToolCall.ID, Name: p.ToolCall.Name, Args: p.ToolCall.Args})
		case p.ToolResult != nil:
			if i, ok := index[ev.Author+"\x00"+p.ToolResult.ID]; ok {
				tr.ToolCalls[i].Result, tr.ToolCalls[i].Error = p.ToolResult.Result, p.ToolResult.Error
			}
		}
	}
	if ev.Final {
		tr.Final = ev.Content
		tr.FinalText = ev.Content.Text()
	}
}
