// The root's names for the model-calling parts in internal/llm: the LLM
// rubric judge, the LLM user simulator and ScenarioAdapter, and the
// provider clients they share (ModelEnv). Each name is the same type,
// constant, variable or function as the llm package's, whose doc comments
// carry the detail.

package evalengine

import (
	"net/http"

	"github.com/fadcedab/adk/agent/model"
	"github.com/fadcedab/adk/evalengine/internal/llm"
)

const (
	// CodeLLMJudge is the Code of every judge error; the Reason is one of the
	// Judge* codes below, so an error reads as the contract's {llm_judge,
	// Code}.
	CodeLLMJudge = llm.CodeLLMJudge
)

// LLM judge error reasons (CONTRACTS §5.8).
const (
	JudgeInvalidConfig              = llm.JudgeInvalidConfig
	JudgeConfigTooLarge             = llm.JudgeConfigTooLarge
	JudgeUnknownConfigKey           = llm.JudgeUnknownConfigKey
	JudgeInvalidRubric              = llm.JudgeInvalidRubric
	JudgeInvalidRubricID            = llm.JudgeInvalidRubricID
	JudgeInvalidRubricVersion       = llm.JudgeInvalidRubricVersion
	JudgeInvalidProvider            = llm.JudgeInvalidProvider
	JudgeInvalidModel               = llm.JudgeInvalidModel
	JudgeInvalidProviderConfig      = llm.JudgeInvalidProviderConfig
	JudgeInvalidRequestTimeout      = llm.JudgeInvalidRequestTimeout
	JudgeInvalidMaxPromptBytes      = llm.JudgeInvalidMaxPromptBytes
	JudgeInvalidMaxOutputBytes      = llm.JudgeInvalidMaxOutputBytes
	JudgeInvalidMaxRationaleBytes   = llm.JudgeInvalidMaxRationaleBytes
	JudgeInvalidMaxOutputTokens     = llm.JudgeInvalidMaxOutputTokens
	JudgeInvalidRequestMaxHeapWords = llm.JudgeInvalidRequestMaxHeapWords
	JudgeInvalidCaseInput           = llm.JudgeInvalidCaseInput
	JudgeCaseInputTooLarge          = llm.JudgeCaseInputTooLarge
	JudgePromptTooLarge             = llm.JudgePromptTooLarge
	JudgeProviderWorkerFailed       = llm.JudgeProviderWorkerFailed
	JudgeRequestTimeout             = llm.JudgeRequestTimeout
	JudgeProviderRequestFailed      = llm.JudgeProviderRequestFailed
	JudgeInvalidProviderOutput      = llm.JudgeInvalidProviderOutput
	JudgeOutputTooLarge             = llm.JudgeOutputTooLarge
	JudgeInvalidJudgeOutput         = llm.JudgeInvalidJudgeOutput
)

// Judge identity, defaults and bounds (§5.8).
const (
	JudgeName                  = llm.JudgeName
	JudgeSchemaVersion         = llm.JudgeSchemaVersion
	ProviderGemini             = llm.ProviderGemini
	ProviderOpenAI             = llm.ProviderOpenAI
	DefaultJudgeProvider       = llm.DefaultJudgeProvider
	DefaultJudgeModel          = llm.DefaultJudgeModel
	MaxRubricBytes             = llm.MaxRubricBytes
	MaxRubricIDBytes           = llm.MaxRubricIDBytes
	MaxModelBytes              = llm.MaxModelBytes
	MaxProviderConfigBytes     = llm.MaxProviderConfigBytes
	MaxJudgeConfigBytes        = llm.MaxJudgeConfigBytes
	DefaultJudgeTimeoutMS      = llm.DefaultJudgeTimeoutMS
	MaxJudgeTimeoutMS          = llm.MaxJudgeTimeoutMS
	DefaultMaxPromptBytes      = llm.DefaultMaxPromptBytes
	MinMaxPromptBytes          = llm.MinMaxPromptBytes
	MaxMaxPromptBytes          = llm.MaxMaxPromptBytes
	DefaultMaxOutputBytes      = llm.DefaultMaxOutputBytes
	MinMaxOutputBytes          = llm.MinMaxOutputBytes
	MaxMaxOutputBytes          = llm.MaxMaxOutputBytes
	DefaultMaxRationaleBytes   = llm.DefaultMaxRationaleBytes
	MaxMaxRationaleBytes       = llm.MaxMaxRationaleBytes
	DefaultJudgeMaxTokens      = llm.DefaultJudgeMaxTokens
	MaxJudgeMaxTokens          = llm.MaxJudgeMaxTokens
	DefaultRequestMaxHeapWords = llm.DefaultRequestMaxHeapWords
)

// JudgeConfig is the LLM rubric judge's configuration.
type JudgeConfig = llm.JudgeConfig

// ParseJudgeConfig reads a judge config object (§5.8): a closed key set,
// every value checked against its bound.
func ParseJudgeConfig(v any) (JudgeConfig, error) {
	return llm.ParseJudgeConfig(v)
}

// Judge is an LLM rubric judge bound to one provider.
type Judge = llm.Judge

// NewJudge validates cfg and builds the judge's provider from env (see
// ModelEnv for which settings win).
func NewJudge(cfg JudgeConfig, env ModelEnv) (*Judge, error) {
	return llm.NewJudge(cfg, env)
}

// Verdict is a judge's successful answer.
type Verdict = llm.Verdict

// JudgeCaseDocument is the evaluation case a judge sees for one sample:
// case_id, metadata, the case-level expectations when present, and every
// turn's input, expected, actual and tool steps (args and results included;
// secrets are pruned by the judge before sending).
func JudgeCaseDocument(e CaseEval) map[string]any {
	return llm.JudgeCaseDocument(e)
}

// Default API key environment variables, used when a provider config names
// neither api_key_env nor api_key.
const (
	DefaultGeminiAPIKeyEnv = llm.DefaultGeminiAPIKeyEnv
	DefaultOpenAIAPIKeyEnv = llm.DefaultOpenAIAPIKeyEnv
)

// ModelEnv is what the machine running an evaluation supplies to
// model-backed metrics (the LLM judge) and simulators (the LLM user): the
// provider, model and provider configuration from the operator's own
// configuration, and credentials only through environment variables.
type ModelEnv = llm.ModelEnv

// RateLimiters is the set of provider limiters a run's judges and
// simulators share, one per endpoint (ModelEnv.RateLimits).
type RateLimiters = llm.RateLimiters

// NewRateLimiters returns an empty set.
func NewRateLimiters() *RateLimiters { return llm.NewRateLimiters() }

// ProviderFactory builds the provider for a spec.
type ProviderFactory = llm.ProviderFactory

// ProviderSpec is a resolved provider choice.
type ProviderSpec = llm.ProviderSpec

// NewModelProvider builds the gemini or openai provider of the runtime for
// spec.
func NewModelProvider(spec ProviderSpec, hc *http.Client) (model.Provider, error) {
	return llm.NewModelProvider(spec, hc)
}

// ScenarioAdapter makes a case a scenario instead of a script: each turn's
// input is a scenario (e.g.
type ScenarioAdapter = llm.ScenarioAdapter

// CodeLLMUser is the Code of LLM user simulator errors; reasons are the
// judge's (invalid_config, invalid_provider_config, request_timeout,
// provider_request_failed, invalid_provider_output, output_too_large) plus
// invalid_user_output.
const (
	CodeLLMUser          = llm.CodeLLMUser
	LLMUserInvalidOutput = llm.LLMUserInvalidOutput
)

// LLMUserConfig configures the LLM-backed user simulator.
type LLMUserConfig = llm.LLMUserConfig

// LLMUser is a user simulator driven by a persona and a goal.
type LLMUser = llm.LLMUser

// NewLLMUser validates cfg and builds its provider from env.
func NewLLMUser(cfg LLMUserConfig, env ModelEnv) (*LLMUser, error) {
	return llm.NewLLMUser(cfg, env)
}

// LLMUserFactory returns a ScenarioAdapter.NewUser that reads persona and
// goal (required strings) from a scenario object; other scenario keys are
// left to the environment.
func LLMUserFactory(base LLMUserConfig, env ModelEnv) func(scenario any) (UserSimulator, error) {
	return llm.LLMUserFactory(base, env)
}
