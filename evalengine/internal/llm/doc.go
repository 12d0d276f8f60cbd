// Package llm holds the parts of evalengine that call a model provider:
// the LLM rubric judge (NewJudge, Judge.Metric), the LLM user simulator
// (NewLLMUser, LLMUserFactory) with ScenarioAdapter, which turns a
// scenario case into one simulated conversation, and the provider clients
// they share (ModelEnv builds an openai or gemini provider from the
// machine's environment; credentials come only from environment
// variables). evalengine re-exports every name a caller uses; callers
// outside evalengine never import this package.
//
// The judge and the simulated user are one package because they share
// the provider set-up, the secret redaction of what goes out and comes
// back, and the per-call deadline; neither runs a goroutine of its own.
// It builds on evalengine/internal/evalcore (the case, metric and score
// types) and evalengine/internal/simulation (the user simulator
// interface). It must not import evalengine, evalengine/internal/report,
// evalengine/internal/googleadk, bus, coordinator, worker, store or
// devapi.
package llm
