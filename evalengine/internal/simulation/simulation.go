package simulation

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/fadcedab/adk/evalengine/internal/evalcore"
)

// Simulation error codes (CONTRACTS §5.13). CodeSimulationAgentFailed is
// ours: the contract's simulators drive no agent of their own.
const (
	CodeSimulationStepLimit        = "eval_simulation_step_limit_exceeded"
	CodeSimulatorCallbackTimeout   = "eval_simulator_callback_timeout"
	CodeSimulatorCallbackFailed    = "eval_simulator_callback_failed"
	CodeUserSimulatorFailed        = "eval_user_simulator_failed"
	CodeEnvironmentSimulatorFailed = "eval_environment_simulator_failed"
	CodeEnvironmentNotConfigured   = "eval_environment_simulator_not_configured"
	CodeInvalidSimulationScenario  = "invalid_eval_simulation_scenario"
	CodeSimulatorMissingCallback   = "eval_simulator_missing_callback"
	CodeUnknownSimulationOptions   = "unknown_eval_simulation_options"
	CodeInvalidSimulationOptions   = "invalid_eval_simulation_options"
	CodeSimulationAgentFailed      = "eval_simulation_agent_failed"
	simulationInvalidValueReason   = "invalid_value"
	simulationValueTooLargeReason  = "value_too_large"
	simulationCallbackPanicReason  = "callback_panic"
	simulationUserRole             = "user"
	simulationAgentRole            = "agent"
	simulationEnvironmentRole      = "environment"
	simulationScenarioEnvironment  = "environment"
	defaultSimulationCallbackMS    = 1000
	maxSimulationCallbackMS        = 30_000
	defaultSimulationMaxSteps      = 100
	maxSimulationMaxSteps          = 1000
	defaultSimulationMaxValueBytes = 1 << 20
	maxSimulationMaxValueBytes     = 4 << 20
	simulationHeapWordsLowerBound  = 1000
	simulationHeapWordsUpperBound  = 20_000_000
	simulationTurnIDPrefix         = "sim-"
)

// SimulationOptions bound a simulation. Start from
// DefaultSimulationOptions (or ParseSimulationOptions for JSON).
type SimulationOptions struct {
	// CallbackTimeoutMS is each simulator callback's deadline (1000;
	// 1..30 000). An LLM-backed user needs more than the default.
	CallbackTimeoutMS int `json:"callback_timeout_ms"`
	// MaxSteps is the ceiling on user turns (100; 1..1000).
	MaxSteps int `json:"max_steps"`
	// MaxValueBytes bounds every value crossing a boundary: scenario,
	// user turn, agent output, effect, observation (1 MiB; ≤4 MiB).
	MaxValueBytes int `json:"max_value_bytes"`
	// Context is handed to every callback (plain JSON).
	Context map[string]any `json:"context,omitempty"`
}

// DefaultSimulationOptions are the contract defaults.
func DefaultSimulationOptions() SimulationOptions {
	return SimulationOptions{CallbackTimeoutMS: defaultSimulationCallbackMS, MaxSteps: defaultSimulationMaxSteps, MaxValueBytes: defaultSimulationMaxValueBytes}
}

func (o SimulationOptions) check() error {
	switch {
	case o.CallbackTimeoutMS < 1 || o.CallbackTimeoutMS > maxSimulationCallbackMS:
		return evalcore.NewErr(CodeInvalidSimulationOptions, "callback_timeout_ms")
	case o.MaxSteps < 1 || o.MaxSteps > maxSimulationMaxSteps:
		return evalcore.NewErr(CodeInvalidSimulationOptions, "max_steps")
	case o.MaxValueBytes < 1 || o.MaxValueBytes > maxSimulationMaxValueBytes:
		return evalcore.NewErr(CodeInvalidSimulationOptions, "max_value_bytes")
	case o.Context != nil && !evalcore.PlainJSON(o.Context):
		return evalcore.NewErr(CodeInvalidSimulationOptions, "context")
	}
	return nil
}

// ParseSimulationOptions reads options from a JSON object: callback_timeout_ms,
// max_steps, max_value_bytes, context, and max_heap_words (a BEAM knob,
// validated 1000..20 000 000 for portability, no effect). Other keys are
// unknown_eval_simulation_options.
func ParseSimulationOptions(m map[string]any) (SimulationOptions, error) {
	o := DefaultSimulationOptions()
	if unk := evalcore.UnknownKeys(m, evalcore.KeySet("callback_timeout_ms", "max_steps", "max_value_bytes", "max_heap_words", "context")); len(unk) > 0 {
		return o, evalcore.NewErr(CodeUnknownSimulationOptions, evalcore.KeysDetail(unk))
	}
	for key, dst := range map[string]*int{"callback_timeout_ms": &o.CallbackTimeoutMS, "max_steps": &o.MaxSteps, "max_value_bytes": &o.MaxValueBytes} {
		if v, ok := m[key]; ok {
			n, ok := evalcore.JSONInt(v)
			if !ok || n < 1 || n > maxSimulationMaxValueBytes {
				return o, evalcore.NewErr(CodeInvalidSimulationOptions, key)
			}
			*dst = int(n)
		}
	}
	if v, ok := m["max_heap_words"]; ok {
		n, ok := evalcore.JSONInt(v)
		if !ok || n < simulationHeapWordsLowerBound || n > simulationHeapWordsUpperBound {
			return o, evalcore.NewErr(CodeInvalidSimulationOptions, "max_heap_words")
		}
	}
	if v, ok := m["context"]; ok {
		c, ok := v.(map[string]any)
		if !ok {
			return o, evalcore.NewErr(CodeInvalidSimulationOptions, "context")
		}
		o.Context = c
	}
	return o, o.check()
}

// TranscriptEntry is one line of a simulated conversation: a user turn, an
// agent reply, or an environment observation of an effect.
type TranscriptEntry struct {
	Role    string `json:"role"` // user | agent | environment
	Content any    `json:"content"`
	Effect  any    `json:"effect,omitempty"` // environment entries: the effect observed
}

// SimulationView is what a simulator callback sees. Its values are plain
// JSON and shared with the loop: callbacks must not modify them.
type SimulationView struct {
	Scenario   any
	Transcript []TranscriptEntry
	Step       int // user turns so far
	Context    map[string]any
}

// UserTurn is a user simulator's answer: the next input, or done.
type UserTurn struct {
	Done  bool
	Input any // plain JSON, usually a string
}

// UserSimulator plays the user. A simulator is stateful and used by one
// simulation at a time; make a fresh one per run. NextTurn must honour
// ctx (its per-callback deadline).
type UserSimulator interface {
	NextTurn(ctx context.Context, view SimulationView) (UserTurn, error)
}

// EnvironmentSimulator plays the world the agent acts on: every tool call
// the agent makes is an effect ({tool, args, call_id}) whose observation
// joins the transcript, so the user simulator can react to it (a ticket
// that was opened, a refund that was issued).
type EnvironmentSimulator interface {
	HandleEffect(ctx context.Context, effect any, view SimulationView) (any, error)
}

// Simulation is one scenario run: the user and (optional) environment
// simulators and the agent session under evaluation. Simulators come from
// Go code, never from an evaluation document.
type Simulation struct {
	User        UserSimulator
	Environment EnvironmentSimulator
	Agent       evalcore.Session
	Options     SimulationOptions
}

// SimulationResult is a finished simulation.
type SimulationResult struct {
	Done       bool              `json:"done"`  // the user said done
	Steps      int               `json:"steps"` // user turns taken
	Transcript []TranscriptEntry `json:"transcript"`
	// Outputs are the agent's raw turn outputs (with tool content), for
	// metrics.
	Outputs []evalcore.TurnOutput `json:"-"`
}

// RunSimulation runs the loop: ask the user for a turn (or done), give it
// to the agent, hand each of the agent's tool calls to the environment,
// repeat. It runs on the caller's goroutine; every simulator callback has
// its own deadline (a late answer is eval_simulator_callback_timeout) and
// a panic is eval_simulator_callback_failed. A scenario that declares an
// "environment" needs an EnvironmentSimulator. More than MaxSteps user
// turns is eval_simulation_step_limit_exceeded.
func RunSimulation(ctx context.Context, sim Simulation, scenario any) (*SimulationResult, error) {
	o := sim.Options
	if err := o.check(); err != nil {
		return nil, err
	}
	if sim.User == nil {
		return nil, evalcore.NewErr(CodeSimulatorMissingCallback, simulationUserRole)
	}
	if sim.Agent == nil {
		return nil, evalcore.NewErr(CodeSimulatorMissingCallback, simulationAgentRole)
	}
	scenario, err := boundaryValue(scenario, o.MaxValueBytes)
	if err != nil {
		return nil, &evalcore.Error{Code: CodeInvalidSimulationScenario, Reason: evalcore.ErrorReason(err)}
	}
	if m, ok := scenario.(map[string]any); ok && m[simulationScenarioEnvironment] != nil && sim.Environment == nil {
		return nil, evalcore.NewErr(CodeEnvironmentNotConfigured, "")
	}
	res := &SimulationResult{Transcript: []TranscriptEntry{}}
	view := func() SimulationView {
		return SimulationView{Scenario: scenario, Transcript: res.Transcript[:len(res.Transcript):len(res.Transcript)], Step: res.Steps, Context: o.Context}
	}
	for {
		var turn UserTurn
		err := callback(ctx, o.CallbackTimeoutMS, CodeUserSimulatorFailed, func(cctx context.Context) (err error) {
			turn, err = sim.User.NextTurn(cctx, view())
			return err
		})
		if err != nil {
			return nil, err
		}
		if turn.Done {
			res.Done = true
			return res, nil
		}
		if res.Steps == o.MaxSteps {
			return nil, evalcore.NewErr(CodeSimulationStepLimit, strconv.Itoa(o.MaxSteps))
		}
		input, err := boundaryValue(turn.Input, o.MaxValueBytes)
		if err != nil {
			return nil, &evalcore.Error{Code: CodeUserSimulatorFailed, Reason: evalcore.ErrorReason(err)}
		}
		res.Transcript = append(res.Transcript, TranscriptEntry{Role: simulationUserRole, Content: input})
		out, err := sim.Agent.Turn(ctx, evalcore.TurnInput{TurnID: simulationTurnIDPrefix + strconv.Itoa(res.Steps+1), TurnIndex: res.Steps, Input: input})
		res.Steps++
		if err != nil {
			return nil, &evalcore.Error{Code: CodeSimulationAgentFailed, Reason: evalcore.AdapterTag(err, evalcore.TagAdapterFailed), Err: err}
		}
		reply, err := agentValue(out.Output, o.MaxValueBytes)
		if err != nil {
			return nil, &evalcore.Error{Code: CodeSimulationAgentFailed, Reason: evalcore.ErrorReason(err)}
		}
		res.Outputs = append(res.Outputs, out)
		res.Transcript = append(res.Transcript, TranscriptEntry{Role: simulationAgentRole, Content: reply})
		if sim.Environment == nil {
			continue
		}
		for _, step := range out.Trajectory {
			if step.Kind != "" && step.Kind != evalcore.KindToolCall {
				continue
			}
			effect, err := agentValue(map[string]any{"tool": step.Tool, "args": step.Args, "call_id": step.CallID}, o.MaxValueBytes)
			if err != nil {
				return nil, &evalcore.Error{Code: CodeEnvironmentSimulatorFailed, Reason: evalcore.ErrorReason(err)}
			}
			var obs any
			err = callback(ctx, o.CallbackTimeoutMS, CodeEnvironmentSimulatorFailed, func(cctx context.Context) (err error) {
				obs, err = sim.Environment.HandleEffect(cctx, effect, view())
				return err
			})
			if err != nil {
				return nil, err
			}
			if obs, err = boundaryValue(obs, o.MaxValueBytes); err != nil {
				return nil, &evalcore.Error{Code: CodeEnvironmentSimulatorFailed, Reason: evalcore.ErrorReason(err)}
			}
			res.Transcript = append(res.Transcript, TranscriptEntry{Role: simulationEnvironmentRole, Content: obs, Effect: effect})
		}
	}
}

// callback runs f with its own deadline on the caller's goroutine. A
// returned error is failCode (cause kept), a panic
// eval_simulator_callback_failed, an answer after the deadline
// eval_simulator_callback_timeout.
func callback(ctx context.Context, timeoutMS int, failCode string, f func(context.Context) error) (err error) {
	cctx, cancel := context.WithTimeout(ctx, time.Duration(timeoutMS)*time.Millisecond)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			err = evalcore.ReasonErr(CodeSimulatorCallbackFailed, simulationCallbackPanicReason, "")
		}
	}()
	ferr := f(cctx)
	if cctx.Err() != nil {
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return &evalcore.Error{Code: CodeSimulatorCallbackFailed, Reason: "cancelled", Err: ctx.Err()}
		}
		return &evalcore.Error{Code: CodeSimulatorCallbackTimeout, Err: context.DeadlineExceeded}
	}
	if ferr != nil {
		return &evalcore.Error{Code: failCode, Reason: evalcore.ErrorCode(ferr), Err: ferr}
	}
	return nil
}

// boundaryValue checks a value crossing a simulator boundary: plain JSON
// (no channels, funcs, structs or pointers: the contract's opaque terms)
// within maxBytes.
func boundaryValue(v any, maxBytes int) (any, error) { return crossing(v, maxBytes, false) }

// agentValue is boundaryValue for the agent's output, which may be any Go
// value that encodes as JSON (an in-process adapter's typed map): it is
// converted rather than refused.
func agentValue(v any, maxBytes int) (any, error) { return crossing(v, maxBytes, true) }

func crossing(v any, maxBytes int, convert bool) (any, error) {
	if !evalcore.PlainJSON(v) {
		if !convert {
			return nil, evalcore.ReasonErr(CodeInvalidSimulationScenario, simulationInvalidValueReason, "")
		}
		g, err := evalcore.ToGeneric(v)
		if err != nil || !evalcore.PlainJSON(g) {
			return nil, evalcore.ReasonErr(CodeInvalidSimulationScenario, simulationInvalidValueReason, "")
		}
		v = g
	}
	n, ok := evalcore.PlainSize(v)
	if !ok {
		return nil, evalcore.ReasonErr(CodeInvalidSimulationScenario, simulationInvalidValueReason, "")
	}
	if n > maxBytes {
		return nil, evalcore.ReasonErr(CodeInvalidSimulationScenario, simulationValueTooLargeReason, "")
	}
	return v, nil
}
