package agent

import (
	"errors"
	"fmt"
	"testing"

	"github.com/fadcedab/adk/plugins"
)

// TestError_SameCodeOtherPackageNeverMatches: agent and plugins share the
// codes plugin_failed, plugin_halted and cancelled, yet each package's
// sentinel matches only its own type; a plugin error reaches an agent
// sentinel only as the cause of an agent error, never by its code.
func TestError_SameCodeOtherPackageNeverMatches(t *testing.T) {
	for _, tc := range []struct {
		agentErr, pluginsErr error
	}{
		{ErrPluginFailed, plugins.ErrPluginFailed},
		{ErrPluginHalted, plugins.ErrPluginHalted},
		{&Error{Code: CodeRunCancelled}, plugins.ErrCancelled},
	} {
		pe := fmt.Errorf("ctx: %w", &plugins.Error{Code: tc.pluginsErr.(*plugins.Error).Code, PluginID: "p"})
		ae := fmt.Errorf("ctx: %w", &Error{Code: tc.agentErr.(*Error).Code, Agent: "a"})
		if errors.Is(pe, tc.agentErr) || errors.Is(ae, tc.pluginsErr) {
			t.Errorf("%v and %v match across packages", pe, ae)
		}
		var a *Error
		var p *plugins.Error
		if errors.As(pe, &a) || errors.As(ae, &p) {
			t.Errorf("errors.As crosses packages for %v / %v", pe, ae)
		}
		if !errors.Is(pe, tc.pluginsErr) || !errors.Is(ae, tc.agentErr) {
			t.Errorf("%v / %v do not match their own sentinels", pe, ae)
		}
	}
	wrapped := &Error{Code: CodePluginFailed, Agent: "a", Err: &plugins.Error{Code: plugins.CodePluginFailed, PluginID: "p"}}
	if !errors.Is(wrapped, plugins.ErrPluginFailed) || !errors.Is(wrapped, ErrPluginFailed) {
		t.Error("an agent error caused by a plugin error matches both sentinels")
	}
}
