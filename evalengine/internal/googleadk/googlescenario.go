package googleadk

import (
	"context"
	"strings"

	"github.com/fadcedab/adk/evalengine/internal/evalcore"
	"github.com/fadcedab/adk/evalengine/internal/llm"
	"github.com/fadcedab/adk/evalengine/internal/simulation"
	"github.com/fadcedab/adk/internal/canonjson"
)

// Google ADK conversation_scenario cases. The importer turns one into a
// case of one turn whose input is the scenario ({starting_prompt,
// conversation_plan, user_persona}) and marks it in the case metadata; a
// ScenarioRouter sends such cases through a ScenarioAdapter driven by an
// LLM user simulator (GoogleScenarioUser), every other case to the agent.

// MetaConversationScenario is the case metadata key (value true) that
// marks an imported conversation_scenario case.
const MetaConversationScenario = "google_adk_conversation_scenario"

// NotEvaluatedUserSimulator is the reason a scenario case was not run:
// no user simulator is configured on this machine.
const NotEvaluatedUserSimulator = "user_simulator_not_configured"

// isScenarioCase reports whether c is an imported conversation_scenario.
func isScenarioCase(c *evalcore.Case) bool {
	if c == nil {
		return false
	}
	v, _ := c.Metadata[MetaConversationScenario].(bool)
	return v
}

// googleScenarioCase builds the case of a conversation_scenario.
func googleScenarioCase(eid string, sv any) (evalcore.Case, error) {
	sc, ok := sv.(map[string]any)
	if !ok {
		return evalcore.Case{}, evalcore.ReasonErr(evalcore.CodeInvalidGoogleEvalSet, "conversation_scenario", eid)
	}
	input := map[string]any{}
	sp, _ := gget(sc, "starting_prompt")
	start, ok := sp.(string)
	if !ok || start == "" {
		return evalcore.Case{}, evalcore.ReasonErr(evalcore.CodeInvalidGoogleEvalSet, "conversation_scenario.starting_prompt", eid)
	}
	input["starting_prompt"] = start
	if pv, ok := gget(sc, "conversation_plan"); ok && pv != nil {
		plan, ok := pv.(string)
		if !ok {
			return evalcore.Case{}, evalcore.ReasonErr(evalcore.CodeInvalidGoogleEvalSet, "conversation_scenario.conversation_plan", eid)
		}
		input["conversation_plan"] = plan
	}
	if pv, ok := gget(sc, "user_persona"); ok && pv != nil {
		switch pv.(type) {
		case string, map[string]any:
			input["user_persona"] = evalcore.PruneValue(pv)
		default:
			return evalcore.Case{}, evalcore.ReasonErr(evalcore.CodeInvalidGoogleEvalSet, "conversation_scenario.user_persona", eid)
		}
	}
	return evalcore.Case{ID: eid, Metadata: map[string]any{MetaConversationScenario: true},
		Turns: []evalcore.Turn{{ID: "scenario", Input: input, Metadata: map[string]any{}}}}, nil
}

// ScenarioRouter is the adapter of a set that mixes scripted and
// conversation_scenario cases: scenario cases go to Scenario, the rest to
// Script.
type ScenarioRouter struct {
	Script   evalcore.Adapter
	Scenario evalcore.Adapter
}

// NewSession opens the session of the case's kind.
func (r *ScenarioRouter) NewSession(ctx context.Context, info evalcore.SampleInfo) (evalcore.Session, error) {
	if isScenarioCase(info.Case) {
		return r.Scenario.NewSession(ctx, info)
	}
	return r.Script.NewSession(ctx, info)
}

// builtinPersonas are adk-python's pre-built persona ids.
var builtinPersonas = map[string]string{
	"EXPERT":    "An expert user who knows the domain, is precise and brief, and expects precise answers.",
	"NOVICE":    "A novice user who is unsure of the terms, asks basic questions and needs guidance.",
	"EVALUATOR": "A careful user who checks each answer and follows the conversation plan strictly.",
}

// GoogleScenarioUser returns a ScenarioAdapter.NewUser for imported
// conversation scenarios: the first user turn is the starting_prompt
// verbatim (as adk-python requires), later turns come from an LLMUser
// whose persona is user_persona and whose goal is the conversation_plan,
// and the conversation ends after maxTurns user turns (adk-python's
// max_allowed_invocations) without an error.
func GoogleScenarioUser(base llm.LLMUserConfig, env llm.ModelEnv, maxTurns int) func(scenario any) (simulation.UserSimulator, error) {
	return func(scenario any) (simulation.UserSimulator, error) {
		m, ok := scenario.(map[string]any)
		if !ok {
			return nil, evalcore.NewErr(simulation.CodeInvalidSimulationScenario, "not_an_object")
		}
		start, _ := m["starting_prompt"].(string)
		if start == "" {
			return nil, evalcore.NewErr(simulation.CodeInvalidSimulationScenario, "starting_prompt")
		}
		cfg := base
		cfg.Goal, _ = m["conversation_plan"].(string)
		if cfg.Goal == "" {
			cfg.Goal = "Get a complete answer to: " + start
		}
		switch p := m["user_persona"].(type) {
		case string:
			if d, ok := builtinPersonas[strings.ToUpper(p)]; ok {
				cfg.Persona = d
			} else {
				cfg.Persona = p
			}
		case map[string]any:
			b, err := canonjson.Marshal(p)
			if err != nil {
				return nil, evalcore.NewErr(simulation.CodeInvalidSimulationScenario, "user_persona")
			}
			cfg.Persona = string(b)
		default:
			cfg.Persona = builtinPersonas["NOVICE"]
		}
		llm, err := llm.NewLLMUser(cfg, env)
		if err != nil {
			return nil, err
		}
		return &scenarioUser{start: start, next: llm, maxTurns: maxTurns}, nil
	}
}

type scenarioUser struct {
	start    string
	next     simulation.UserSimulator
	maxTurns int
}

func (u *scenarioUser) NextTurn(ctx context.Context, view simulation.SimulationView) (simulation.UserTurn, error) {
	switch {
	case view.Step >= u.maxTurns:
		return simulation.UserTurn{Done: true}, nil
	case view.Step == 0:
		return simulation.UserTurn{Input: u.start}, nil
	}
	return u.next.NextTurn(ctx, view)
}

var _ evalcore.Adapter = (*ScenarioRouter)(nil)

// WithoutScenarioCases returns set without its conversation_scenario
// cases (a copy; set itself is unchanged) and their ids, for a run that
// has no user simulator. Without scenario cases it returns set itself.
func WithoutScenarioCases(set *evalcore.Set) (*evalcore.Set, []string) {
	var ids []string
	for i := range set.Cases {
		if isScenarioCase(&set.Cases[i]) {
			ids = append(ids, set.Cases[i].ID)
		}
	}
	if len(ids) == 0 {
		return set, nil
	}
	out := *set
	out.Cases = make([]evalcore.Case, 0, len(set.Cases)-len(ids))
	for i := range set.Cases {
		if !isScenarioCase(&set.Cases[i]) {
			out.Cases = append(out.Cases, set.Cases[i])
		}
	}
	return &out, ids
}
