// The root's names for the Google ADK import in internal/googleadk:
// EvalSet and .test.json files, test_config.json criteria, and
// conversation_scenario cases. Each name is the same type, constant or
// function as the googleadk package's, whose doc comments carry the
// detail.

package evalengine

import (
	"github.com/fadcedab/adk/evalengine/internal/googleadk"
)

// SetFormat names the shape LoadSet recognised.
type SetFormat = googleadk.SetFormat

// Recognised eval set formats.
const (
	// native schema 1 or 2
	SetFormatADK = googleadk.SetFormatADK

	// .evalset.json (EvalSet)
	SetFormatGoogleEvalSet = googleadk.SetFormatGoogleEvalSet

	// legacy .test.json list
	SetFormatGoogleTestJSON = googleadk.SetFormatGoogleTestJSON
)

// LoadSet reads an eval set in any supported format, detected by shape: a
// native set (schema 1 or 2), a Google ADK EvalSet (.evalset.json: an
// object with eval_set_id / eval_cases) or a legacy Google ADK .test.json
// list of {query, expected_tool_use, reference}.
func LoadSet(data []byte) (*Set, SetFormat, error) {
	return googleadk.LoadSet(data)
}

// LoadSetWithOptions is LoadSet with options.
func LoadSetWithOptions(data []byte, opts LoadOptions) (*Set, SetFormat, error) {
	return googleadk.LoadSetWithOptions(data, opts)
}

// EncodeSet writes a set as its canonical JSON document plus a newline: the
// file `adk eval convert` produces.
func EncodeSet(s *Set) ([]byte, error) {
	return googleadk.EncodeSet(s)
}

// Google ADK test_config.json (adk-python's EvalConfig) error codes.
const (
	CodeInvalidGoogleTestConfig = googleadk.CodeInvalidGoogleTestConfig
	CodeUnknownGoogleCriterion  = googleadk.CodeUnknownGoogleCriterion
)

const (
	// GoogleTestConfigFile is the name adk-python's AgentEvaluator looks for
	// beside a .test.json file; adk uses it beside any Google ADK eval set.
	GoogleTestConfigFile = googleadk.GoogleTestConfigFile
)

// Bounds of a scenario conversation (adk-python's user_simulator_config
// max_allowed_invocations, default 20).
const (
	DefaultScenarioMaxTurns = googleadk.DefaultScenarioMaxTurns
	MaxScenarioMaxTurns     = googleadk.MaxScenarioMaxTurns
)

// GoogleTestConfig is a test_config.json mapped onto adk: the criteria as
// an adk criteria document (ParseCriteria reads it) and the scenario turn
// bound from its user_simulator_config.
type GoogleTestConfig = googleadk.GoogleTestConfig

// ParseGoogleTestConfig maps a test_config.json onto adk criteria.
func ParseGoogleTestConfig(data []byte) (*GoogleTestConfig, error) {
	return googleadk.ParseGoogleTestConfig(data)
}

const (
	// MetaConversationScenario is the case metadata key (value true) that
	// marks an imported conversation_scenario case.
	MetaConversationScenario = googleadk.MetaConversationScenario
)

const (
	// NotEvaluatedUserSimulator is the reason a scenario case was not run: no
	// user simulator is configured on this machine.
	NotEvaluatedUserSimulator = googleadk.NotEvaluatedUserSimulator
)

// ScenarioRouter is the adapter of a set that mixes scripted and
// conversation_scenario cases: scenario cases go to Scenario, the rest to
// Script.
type ScenarioRouter = googleadk.ScenarioRouter

// GoogleScenarioUser returns a ScenarioAdapter.NewUser for imported
// conversation scenarios: the first user turn is the starting_prompt
// verbatim (as adk-python requires), later turns come from an LLMUser whose
// persona is user_persona and whose goal is the conversation_plan, and the
// conversation ends after maxTurns user turns (adk-python's
// max_allowed_invocations) without an error.
func GoogleScenarioUser(base LLMUserConfig, env ModelEnv, maxTurns int) func(scenario any) (UserSimulator, error) {
	return googleadk.GoogleScenarioUser(base, env, maxTurns)
}

// WithoutScenarioCases returns set without its conversation_scenario cases
// (a copy; set itself is unchanged) and their ids, for a run that has no
// user simulator.
func WithoutScenarioCases(set *Set) (*Set, []string) {
	return googleadk.WithoutScenarioCases(set)
}
