// The root's names for the user and environment simulation loop in
// internal/simulation (CONTRACTS §5.14). Each name is the same type,
// constant or function as the simulation package's, whose doc comments
// carry the detail.

package evalengine

import (
	"context"

	"github.com/fadcedab/adk/evalengine/internal/simulation"
)

// Simulation error codes (CONTRACTS §5.13).
const (
	CodeSimulationStepLimit        = simulation.CodeSimulationStepLimit
	CodeSimulatorCallbackTimeout   = simulation.CodeSimulatorCallbackTimeout
	CodeSimulatorCallbackFailed    = simulation.CodeSimulatorCallbackFailed
	CodeUserSimulatorFailed        = simulation.CodeUserSimulatorFailed
	CodeEnvironmentSimulatorFailed = simulation.CodeEnvironmentSimulatorFailed
	CodeEnvironmentNotConfigured   = simulation.CodeEnvironmentNotConfigured
	CodeInvalidSimulationScenario  = simulation.CodeInvalidSimulationScenario
	CodeSimulatorMissingCallback   = simulation.CodeSimulatorMissingCallback
	CodeUnknownSimulationOptions   = simulation.CodeUnknownSimulationOptions
	CodeInvalidSimulationOptions   = simulation.CodeInvalidSimulationOptions
	CodeSimulationAgentFailed      = simulation.CodeSimulationAgentFailed
)

// SimulationOptions bound a simulation.
type SimulationOptions = simulation.SimulationOptions

// DefaultSimulationOptions are the contract defaults.
func DefaultSimulationOptions() SimulationOptions {
	return simulation.DefaultSimulationOptions()
}

// ParseSimulationOptions reads options from a JSON object:
// callback_timeout_ms, max_steps, max_value_bytes, context, and
// max_heap_words (a BEAM knob, validated 1000..20 000 000 for portability,
// no effect).
func ParseSimulationOptions(m map[string]any) (SimulationOptions, error) {
	return simulation.ParseSimulationOptions(m)
}

// TranscriptEntry is one line of a simulated conversation: a user turn, an
// agent reply, or an environment observation of an effect.
type TranscriptEntry = simulation.TranscriptEntry

// SimulationView is what a simulator callback sees.
type SimulationView = simulation.SimulationView

// UserTurn is a user simulator's answer: the next input, or done.
type UserTurn = simulation.UserTurn

// UserSimulator plays the user.
type UserSimulator = simulation.UserSimulator

// EnvironmentSimulator plays the world the agent acts on: every tool call
// the agent makes is an effect ({tool, args, call_id}) whose observation
// joins the transcript, so the user simulator can react to it (a ticket
// that was opened, a refund that was issued).
type EnvironmentSimulator = simulation.EnvironmentSimulator

// Simulation is one scenario run: the user and (optional) environment
// simulators and the agent session under evaluation.
type Simulation = simulation.Simulation

// SimulationResult is a finished simulation.
type SimulationResult = simulation.SimulationResult

// RunSimulation runs the loop: ask the user for a turn (or done), give it
// to the agent, hand each of the agent's tool calls to the environment,
// repeat.
func RunSimulation(ctx context.Context, sim Simulation, scenario any) (*SimulationResult, error) {
	return simulation.RunSimulation(ctx, sim, scenario)
}
