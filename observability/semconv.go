package observability

import (
	"strings"

	"github.com/fadcedab/adk/internal/secrets"
)

// SemconvVersion pins the gen-ai semantic conventions the attribute mapping
// follows. It is written on every span as MappingVersionKey.
const SemconvVersion = "gen-ai-semconv-development-2026-07-14"

// Gen-AI attribute keys (the closed mapping of CONTRACTS §2.4).
const (
	AttrOperationName  = "gen_ai.operation.name"
	MappingVersionKey  = "adk.gen_ai.mapping.version"
	AttrProviderName   = "gen_ai.provider.name"
	AttrRequestModel   = "gen_ai.request.model"
	AttrResponseModel  = "gen_ai.response.model"
	AttrResponseID     = "gen_ai.response.id"
	AttrToolName       = "gen_ai.tool.name"
	AttrToolCallID     = "gen_ai.tool.call.id"
	AttrInputTokens    = "gen_ai.usage.input_tokens"
	AttrOutputTokens   = "gen_ai.usage.output_tokens"
	AttrCacheReadInput = "gen_ai.usage.cache_read.input_tokens"
	AttrReasonTokens   = "gen_ai.usage.reasoning_tokens"
	AttrFinishReasons  = "gen_ai.response.finish_reasons"
	AttrErrorType      = "error.type"
)

// Eval attribute keys: bounded metadata (ids, never content) that tie a
// span to the eval job, case, sample and worker that ran it. The trace
// store indexes job, case and sample as the nested selectors job_id,
// case_id, sample_id.
const (
	AttrEvalJobID    = "adk.eval.job_id"
	AttrEvalCaseID   = "adk.eval.case_id"
	AttrEvalSampleID = "adk.eval.sample_id"
	AttrEvalWorkerID = "adk.eval.worker_id"
)

// Gen-AI operation names (the span name is "gen_ai." + operation).
const (
	OpChat            = "chat"
	OpGenerateContent = "generate_content"
	OpInvokeAgent     = "invoke_agent"
	OpExecuteTool     = "execute_tool"
	OpWorkflow        = "workflow"
	OpLiveConnect     = "live_connect"
	OpLiveReceive     = "live_receive"
	OpEvaluate        = "evaluate"
)

// Bounds of mapped values.
const (
	maxProviderBytes   = 256
	maxAttrValueBytes  = 512
	maxFinishReasons   = 16
	unknownErrorType   = "unknown"
	maxErrorTypeBytes  = 128
	captureErrorKey    = "capture_error"
	unsupportedContent = "unsupported_content"
)

// operationOf maps an observed kind to its gen-ai operation and span kind.
// A run is the server-side entry of an agent invocation (it is the span a
// remote caller's client span parents); an agent turn is an internal
// invoke_agent.
func operationOf(k Kind) (op, spanKind string) {
	switch k {
	case KindRun:
		return OpInvokeAgent, SpanKindServer
	case KindAgent:
		return OpInvokeAgent, SpanKindInternal
	case KindModel:
		return OpGenerateContent, SpanKindClient
	case KindTool:
		return OpExecuteTool, SpanKindInternal
	case KindWorkflow:
		return OpWorkflow, SpanKindInternal
	case KindEval:
		return OpEvaluate, SpanKindInternal
	}
	return "", ""
}

// constValue returns s as an attribute value, without allocating for the
// operation names and statuses the tracer writes on every signal (a
// constant in an interface is static data; a variable is copied to the
// heap).
func constValue(s string) any {
	switch s {
	case OpInvokeAgent:
		return OpInvokeAgent
	case OpGenerateContent:
		return OpGenerateContent
	case OpExecuteTool:
		return OpExecuteTool
	case OpWorkflow:
		return OpWorkflow
	case OpEvaluate:
		return OpEvaluate
	case StatusOK:
		return StatusOK
	case StatusError:
		return StatusError
	case "pass":
		return "pass"
	case "fail":
		return "fail"
	}
	return s
}

// spanName returns the interned "gen_ai.<op>" name (no allocation).
func spanName(op string) string {
	switch op {
	case OpInvokeAgent:
		return "gen_ai.invoke_agent"
	case OpGenerateContent:
		return "gen_ai.generate_content"
	case OpExecuteTool:
		return "gen_ai.execute_tool"
	case OpWorkflow:
		return "gen_ai.workflow"
	case OpEvaluate:
		return "gen_ai.evaluate"
	}
	return "gen_ai." + op
}

// usageKeys are the four integer usage counters: the only attribute keys the
// secret-key rule ("token") would prune that a span keeps, and only as
// non-negative integers.
func isUsageKey(k string) bool {
	switch k {
	case AttrInputTokens, AttrOutputTokens, AttrCacheReadInput, AttrReasonTokens:
		return true
	}
	return false
}

// isSensitiveKey is the shared secret-key rule.
func isSensitiveKey(k string) bool { return secrets.IsSensitiveKey(k) }

// contentWords are the keys that name content: an attribute key that, after
// lowercasing and stripping "_ - space . :", equals or ends with one is
// forbidden (CONTRACTS §2.7).
var contentWords = []string{
	"content", "contents", "prompt", "prompts", "message", "messages", "text",
	"audio", "video", "image", "media", "transcript", "transcription",
	"inputmessages", "outputmessages", "toolarguments", "toolargs",
	"toolresult", "toolresponse", "reasoning", "reasoningtrace",
	"systeminstruction", "systeminstructions",
	// Beyond the contract's list: the semconv's own tool payload attributes
	// (gen_ai.tool.call.arguments, gen_ai.tool.call.result).
	"arguments", "callresult",
}

// IsForbiddenAttributeKey reports whether k may never be a signal attribute:
// credential-like by the secret-key rule (the four usage counters excepted)
// or naming content.
func IsForbiddenAttributeKey(k string) bool {
	if isUsageKey(k) {
		return false
	}
	if isSensitiveKey(k) {
		return true
	}
	n := normalizeKey(k)
	for _, w := range contentWords {
		if strings.HasSuffix(n, w) {
			return true
		}
	}
	return false
}

func normalizeKey(k string) string {
	var b strings.Builder
	b.Grow(len(k))
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c == '_' || c == '-' || c == ' ' || c == '.' || c == ':':
		case c >= 'A' && c <= 'Z':
			b.WriteByte(c + 'a' - 'A')
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// setText sets a bounded metadata string; empty or oversized values are not
// mapped (an oversized model name is more likely content than metadata).
func setText(a Attributes, k, v string, limit int) {
	if v != "" && len(v) <= limit {
		a[k] = v
	}
}

// startAttributes maps an observation to its metadata-only semantic
// attributes. Nothing else of the observation (content in particular) is
// ever mapped.
func startAttributes(op string, k Kind, c *Correlation, provider string, eval *evalValues) Attributes {
	a := make(Attributes, 4+eval.len())
	a[AttrOperationName] = constValue(op)
	a[MappingVersionKey] = SemconvVersion
	switch k {
	case KindModel:
		setText(a, AttrProviderName, provider, maxProviderBytes)
		setText(a, AttrRequestModel, c.Model, maxAttrValueBytes)
	case KindTool:
		setText(a, AttrToolName, c.Tool, maxAttrValueBytes)
		setText(a, AttrToolCallID, c.CallID, maxAttrValueBytes)
	}
	eval.set(a)
	return a
}

// endAttributes adds the outcome's metadata to a copy of the start
// attributes.
func endAttributes(start Attributes, k Kind, out *Outcome, errType string) Attributes {
	n := len(start) + 1
	if k == KindModel {
		n += 8
	}
	a := make(Attributes, n)
	for key, v := range start {
		a[key] = v
	}
	if k == KindModel {
		setText(a, AttrResponseModel, out.ResponseModel, maxAttrValueBytes)
		setText(a, AttrResponseID, out.ResponseID, maxAttrValueBytes)
		if u := out.Usage; u != nil {
			setCount(a, AttrInputTokens, u.InputTokens)
			setCount(a, AttrOutputTokens, u.OutputTokens)
			setCount(a, AttrCacheReadInput, u.CacheReadTokens)
			setCount(a, AttrReasonTokens, u.ReasoningTokens)
		}
		if len(out.FinishReasons) > 0 {
			fr := make([]string, 0, min(len(out.FinishReasons), maxFinishReasons))
			for _, r := range out.FinishReasons {
				if len(fr) == maxFinishReasons {
					break
				}
				if finishReasonKept(r) {
					fr = append(fr, r)
				}
			}
			if len(fr) > 0 {
				a[AttrFinishReasons] = fr
			}
		}
	}
	if errType != "" {
		a[AttrErrorType] = errType
	}
	return a
}

// finishReasonKept: a finish reason is mapped when it is a bounded,
// non-empty tag.
func finishReasonKept(r string) bool { return r != "" && len(r) <= maxAttrValueBytes }

func setCount(a Attributes, k string, n int64) {
	if n >= 0 {
		a[k] = n
	}
}

// Resource attribute keys a span record keeps (as span attributes of the
// same name) when it arrives with them on its OTLP resource: the bounded
// set that names the service and deployment a span came from. Every other
// resource attribute is deployment data that may hold secrets
// (process.command_line) and is not stored. The OTLP forwarder lifts these
// keys back onto the resource it sends.
var ResourceAttributeKeys = [...]string{
	"service.name",
	"service.namespace",
	"service.version",
	"service.instance.id",
	"deployment.environment",
	"deployment.environment.name",
	"telemetry.sdk.name",
	"telemetry.sdk.language",
	"telemetry.sdk.version",
}

// AttrRule is how the value of an allowlisted span attribute is kept.
type AttrRule uint8

// Attribute rules.
const (
	// AttrRuleText keeps a string of at most 512 bytes (error.type: 128).
	AttrRuleText AttrRule = iota + 1
	// AttrRuleCount keeps a non-negative integer (the usage counters).
	AttrRuleCount
	// AttrRuleTextList keeps a list of at most 16 such strings.
	AttrRuleTextList
)

// Identity attribute keys: ids (never content) that make a span
// selectable in the trace store.
const (
	AttrRunID        = "run_id"
	AttrInvocationID = "invocation_id"
	AttrWorkflowID   = "workflow_id"
)

// SpanIdentityKeys are the identity attributes a span record carries (the
// trace id is a field of its own); an OTLP resource may lend them to its
// spans.
var SpanIdentityKeys = [...]string{AttrRunID, AttrInvocationID, AttrWorkflowID}

// RecordIdentityKeys are the keys of a stored record's identity, sorted.
var RecordIdentityKeys = [...]string{AttrInvocationID, AttrRunID, "trace_id", AttrWorkflowID}

// MetadataAttributes is the one allowlist of the attributes a span record
// keeps: metadata only (operation, provider, models, response id, tool
// name and call id, finish reasons, usage counters, error type), the
// identity and eval ids, the lifecycle words of v1 metadata, the mapping
// versions, and the bounded resource keys. The OTLP receiver keeps
// exactly these from a foreign span and the trace store projects every
// record onto them; anything else (content, credentials, free text) is
// dropped.
var MetadataAttributes = func() map[string]AttrRule {
	m := map[string]AttrRule{
		AttrOperationName: AttrRuleText, AttrProviderName: AttrRuleText, AttrRequestModel: AttrRuleText,
		AttrResponseModel: AttrRuleText, AttrResponseID: AttrRuleText, AttrToolName: AttrRuleText,
		AttrToolCallID: AttrRuleText, AttrErrorType: AttrRuleText, AttrFinishReasons: AttrRuleTextList,
		AttrInputTokens: AttrRuleCount, AttrOutputTokens: AttrRuleCount, AttrCacheReadInput: AttrRuleCount,
		AttrReasonTokens: AttrRuleCount,
		AttrRunID:        AttrRuleText, AttrInvocationID: AttrRuleText, AttrWorkflowID: AttrRuleText,
		AttrEvalJobID: AttrRuleText, AttrEvalCaseID: AttrRuleText, AttrEvalSampleID: AttrRuleText, AttrEvalWorkerID: AttrRuleText,
		// v1 metadata attributes: lifecycle words and the mapping versions
		// (ours, and the contract fixtures').
		"phase": AttrRuleText, "hook": AttrRuleText, "outcome": AttrRuleText, "status": AttrRuleText,
		"stream": AttrRuleText, captureErrorKey: AttrRuleText,
		MappingVersionKey: AttrRuleText, "erlang_adk.gen_ai.mapping.version": AttrRuleText,
	}
	for _, k := range ResourceAttributeKeys {
		m[k] = AttrRuleText
	}
	return m
}()
