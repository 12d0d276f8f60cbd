package session

import (
	"time"

	"github.com/fadcedab/adk/agent/model"
)

// Actions are the side effects an event carries.
type Actions struct {
	StateDelta      map[string]any `json:"state_delta,omitempty"`
	TransferToAgent string         `json:"transfer_to_agent,omitempty"`
	Escalate        bool           `json:"escalate,omitempty"`
}

// Event is one entry of a session: a user message, a model turn, a tool
// result, or a workflow lifecycle notice.
type Event struct {
	ID           string         `json:"id"`
	InvocationID string         `json:"invocation_id"`
	Author       string         `json:"author"` // "user" or an agent name
	Content      *model.Message `json:"content,omitempty"`
	Actions      Actions        `json:"actions"`
	Partial      bool           `json:"partial,omitempty"`
	Final        bool           `json:"final,omitempty"`
	Time         time.Time      `json:"time"`
	Usage        *model.Usage   `json:"usage,omitempty"`
	// Workflow is set on workflow lifecycle events (workflow-lifecycle v1).
	Workflow map[string]any `json:"workflow,omitempty"`
}

// Session is a conversation: ordered events and state.
type Session struct {
	ID      string         `json:"id"`
	AppName string         `json:"app_name"`
	UserID  string         `json:"user_id"`
	Events  []Event        `json:"events"`
	State   map[string]any `json:"state"`
}
