// Package evalengine is the evaluation engine: the eval set schema (v2, v1
// still readable, Google ADK files imported), run options, the run engine
// over cases × samples × turns, the Adapter interface to the system under
// test, built-in criteria and custom metrics, the result document and its
// strict decoding, baseline comparison and the canonical exports (json,
// markdown, junit, sarif, annotations, html). The contract is CONTRACTS.md §5.1–
// 5.11; the LLM judge, built-in metrics, statistics, ensembles, human
// review and simulation follow §5.8 and §5.12–5.14.
//
// It is a pure library. It must not import bus, coordinator, worker, store
// or devapi: a local `adk eval run` and a distributed job run the same code
// (Run, or RunSample per task plus Aggregate) and produce the same result
// document apart from timings. It may import agent, plugins, observability
// and internal; today it needs internal (jsonlimit, secrets, canonjson),
// observability (the run's spans) and agent/model with its gemini and
// openai providers (the judge and the LLM user simulator). The default
// agent adapter (fresh agent, Runner and session per sample, from
// AGENT.json) is evalengine/agentadapter; the HTTP adapter is
// evalengine/httpadapter.
//
// # Packages
//
// This package is the API: every name a caller uses is here, and callers
// import nothing else of evalengine. The code lives in internal packages,
// one per heading below, each with a doc.go saying what it must not
// import; the root re-exports their names (api_*.go: type aliases,
// constants and wrappers with the same signatures) and keeps only what
// ties them together, criteria files (criteriafile.go) and job
// preparation (prepare.go).
//
//	internal/evalcore    the set, options, Adapter, criteria and built-in
//	                     metrics, the run engine ("Scheduling"), the result
//	                     and its decoding, comparison, statistics, ensembles,
//	                     review; below everything else
//	internal/report      Render, RenderHTML, Failures, CompareReport,
//	                     StatsReport
//	internal/simulation  RunSimulation and the simulator interfaces
//	internal/llm         the judge and its provider clients (ModelEnv), the
//	                     LLM user simulator and ScenarioAdapter
//	internal/googleadk   LoadSet and the Google ADK import ("Google ADK
//	                     import"), test_config.json, conversation_scenario
//
// They import upwards in that order (googleadk uses llm and simulation; llm
// uses simulation; all use evalcore), and report uses evalcore only.
//
// # Flow
//
//	LoadSet(bytes) -> *Set               bounded (jsonlimit), 2 s validation budget
//	ParseCriteria(bytes) -> []Metric     or DefaultCriteria(), or custom Metrics
//	Run(ctx, set, RunConfig{Adapter, Metrics, Options}) -> *Result
//	Compare(baseline, current, CompareOptions) -> *Comparison
//	Render(result|comparison, format, ExportOptions) -> bytes
//	WriteJSON(w, result, ExportOptions)  Render's JSON bytes to w; a run's
//	                                     result goes out in 64 KiB pieces of
//	                                     its samples' own encodings, never as
//	                                     one document (adk eval run)
//	Failures(result) -> []CaseFailure    why each case failed; the one source
//	                                     of reasons for every renderer
//	ParseGoogleTestConfig(bytes)          adk-python test_config.json criteria
//	                                     mapped onto adk's (internal/googleadk)
//	ScenarioRouter, GoogleScenarioUser    conversation_scenario cases through the
//	                                     LLM user simulator (internal/googleadk)
//	RenderHTML(result, comparison, ExportOptions) -> one self-contained page
//	CompareReport(baseline, current, ...)     `adk eval compare`
//	ResultSide(result) | StreamSide(stream) -> *CompareSide
//	ReadStreamSide(jsonl reader) -> *CompareSide   one pass, no sample index
//	OpenStreamCases(header, summary).Read(case lines)  a stored result's
//	                                     cases, no sample line read
//	  .ReadRange(some case lines, from, to)  a page's cases only
//	  .ReadSamples(sample lines, ci, case)   one case's samples, the
//	                                     other cases' lines undecoded
//	  .ReadCaseSamples(its lines, ci, case, from, to)  samples from..to-1
//	                                     of a case, read by task index
//	CompareSides(baseline, current, ...)      Compare of any size (16.)
//	WriteComparison(w, comparison, json|markdown, ...)  a row at a time,
//	                                     whole past the bound (17.)
//	WriteCompareSidesReport(w, sides, comparison, ...)  `adk eval compare`
//	RenderComparisonPage(comparison, ...)  a comparison's html, paged (17.)
//	ReadComparison(reader) -> *Comparison  a comparison of any size, a row
//	                                     at a time (17.)
//	StatsReport(results, StatsOptions)        `adk eval stats`
//	NewStatsBuilder(n, StatsOptions)          the same a result at a time:
//	  .AddResult(result) | .Add(ReadStreamSeries(jsonl reader))  (18.)
//
// # Scheduling
//
// Run starts min(Concurrency, total samples) workers, owned and waited for
// by Run. Each takes the next (case, sample) from a scheduler that serves
// cases round robin in sample-major order (sample 0 of every case, then
// sample 1, ...) and skips a case while SampleConcurrency of its samples
// are in flight. There are no barrier batches: a slot is refilled as soon
// as a sample ends. Concurrency is therefore the bound on samples in
// flight (the Little's-law knob); SampleConcurrency limits one case's
// fan-out. Turns of one sample run in order on the worker's goroutine, so
// there is no goroutine per sample or per turn. A worker that finds no
// sample left stops; RunConfig.WorkersRunning hears of each stop, with how
// many workers still run, down to 0 before Run returns: `adk eval run`
// closes the model providers' idle connections beyond that many as the
// last wave ends (agent.KeepIdleConnections), so its exit, after the
// report, has none to close (bench/RESULTS.md, session 23, h29x).
//
// Each sample gets a context with deadline min(run deadline, start +
// case_timeout_ms). It is the sample's one cancel scope: Run's worker
// lends it to the agent Runner and the model call path
// (internal/samplescope), which use it instead of nesting a context or a
// context.AfterFunc of their own. A fleet worker's run slot lends its
// samples one the same way (SampleSlot, SampleRunner.RunInSlot, with the
// task's deadline folded into the sample's); a single-sample run
// elsewhere (RunSample, SampleRunner.Run) lends nothing, and they nest
// theirs as before.
// Adapters must honour it; a reply that arrives after the deadline is
// recorded as "timeout" (contract: late reply ⇒ timeout).
// Samples not started when the run deadline passes are recorded as
// "timeout". A caller that cancels ctx gets evaluation_cancelled and no
// result. Panics in adapters and metrics are recovered into error tags
// (adapter_exception, adapter_init_exception) and error scores
// (metric_exception).
//
// # Decisions on the contract's quirks (CONTRACTS §9 and others)
//
//  1. A null expectation is no expectation. The contract lets a turn whose
//     expected is JSON null form an exact_response pair (comparing null to
//     the output); here it does not, and neither does a null response
//     inside an expected object. A null session_input, expected_trajectory
//     or expected_final_response is the same as absent and is not written
//     back.
//  2. The case aggregate does not copy sample 0's turns. It keeps case_id,
//     sample 0's public trajectory (which baseline comparison needs for
//     trajectory_changed) and metadata, plus the aggregate fields; the
//     turns live once, in samples[]. sample_id, sample_index and error are
//     per sample only. This halves the report for single-sample runs.
//  3. Engine statistics (metric and sample statistics in results) use the
//     population standard deviation (÷n), as the contract's engine does.
//  4. Args "subset" compares arrays as a positional prefix, as the
//     contract says: expected [a, b] is contained in actual [a, b, c] but
//     not in [b, a]. Objects are compared key by key, recursively.
//  5. Multiset matching (any_order, subset, matched_count) is a maximum
//     bipartite matching, not the contract's greedy pass: greedy can pair
//     the wrong duplicate under args "subset"/"ignored" and fail a
//     trajectory that has a valid pairing. With exact args the two agree.
//     Above 2^20 step comparisons the greedy count stands.
//  6. An expected_trajectory that is an empty list is an expectation ("no
//     tool calls"), evaluated like any other; only an absent one is
//     missing_expected_trajectory.
//  7. Case criteria (the per-case aggregate of each metric) pool every
//     result of that metric in the case: one per sample for case scope,
//     one per sample per turn for turn scope. Their metadata.sample_count
//     is that pooled count. Status: ok when all are ok, error when none is
//     ok and at least one errored, not_evaluated when none is ok and none
//     errored, partial otherwise.
//  8. A Score with status ok outside 0..1 (or NaN) becomes an error
//     (invalid_metric_score): a metric cannot pass on a bad number.
//  9. Indices handed to adapters (case, sample, turn) are 0-based; turn
//     ids default to turn-N, 1-based, as the contract says; criteria-file
//     error indices are 1-based.
//  10. max_heap_words and finalize_max_heap_words are BEAM knobs and do not
//     exist here. The report budget is kept: every finished sample charges
//     an estimate of its JSON encoding (about 1.5 × the real size, counted
//     without encoding) against max_report_bytes − (4096 + 1024·cases +
//     512·metrics); exhausting it stops new samples and the run fails with
//     eval_report_budget_exceeded. The contract charges 2 × the BEAM term
//     size + 256, which here would refuse a 10,000-sample run of ~1 KiB
//     samples that fits the 16 MiB report. The final document is measured
//     for real (eval_report_too_large): its canonical encoding, which is
//     what the JSON report and every reader of a saved result see. The
//     workers encode each sample as it finishes (canonjson's bytes,
//     written without reflection by evalcore's sample_encode.go, which
//     falls back to canonjson on any error), and the JSON report
//     splices those bytes rather than encoding every sample again after
//     the last one (the run's tail).
//  11. Render output always ends with a newline, so library, API and CLI
//     bytes are the same. The default suite and tool name is "adk_eval".
//     SARIF declares an "evaluation-case" rule (the ruleId every finding
//     uses) before the one rule per summary metric, so the log is
//     self-consistent for code-scanning tools.
//  12. Adapter metadata is secret-pruned except the token usage counters
//     (input_tokens, output_tokens, prompt_tokens, completion_tokens, ...),
//     which the sensitive-key rule would otherwise drop. Captured tool
//     args/results and events are pruned too.
//  13. Unknown keys in sets are rejected at every level
//     (unknown_eval_set_keys, unknown_eval_case_keys,
//     unknown_eval_turn_keys), like the contract's option maps. Schema-1
//     sets do not accept the v2-only keys.
//  14. Every result carries pass_rate_interval, the 95 % Wilson interval of
//     its case pass rate ({passed, total, rate, confidence_level, lower,
//     upper}); decoding recomputes it like every derived field, so a
//     result without it (or with a forged one) is invalid_eval_result.
//     With no cases the interval is 0..1. The Markdown report prints it
//     on the pass-rate line.
//  15. Reports of a streamed (jsonl) result are not bounded by the 16 MiB
//     of a document. OpenStreamFile reads the stream once, checking every
//     line with the writer's per-line bounds, and keeps 24 bytes a sample
//     (where its line is, whether it passed); RenderStream then walks the
//     cases in order, holding one case and its samples at a time.
//     markdown and junit are written case by case; SARIF is one document,
//     but its results array is written one result at a time (capped at
//     MaxExportFindings as for a document); annotations is an array
//     written an element at a time (more than MaxExportFindings cases is
//     refused, as for a document). The bytes equal Render's of the same
//     result. html is a page a person opens in a browser, so it stays
//     bounded (ExportOptions.MaxBytes, 16 MiB by default): when every
//     case fits, the page is Render's; when not, it is one page showing
//     the failed cases first, then passed ones, each in case order, as
//     many as fit, under a note with the counts and the command that
//     renders every case (markdown etc.). One page was chosen over an
//     index of linked pages: it is one file, written atomically like every
//     report and printable on stdout, and what a reader opens it for, the
//     failures, comes first. json is refused with
//     eval_report_not_streamable: the jsonl is already the full result.
//     A streamed report checks the stream's lines, its completeness, each
//     case's sample counts and the run's case counts; unlike
//     StreamToResult it does not recompute metric averages over the run,
//     which would need every sample at once.
//  16. Baseline comparison of results of any size. Compare reads of each
//     result only its summary and, per case, its id, status, verdict and
//     trajectory: a CompareSide keeps those, the trajectory as a SHA-256
//     digest of its generic form (objects by sorted key, arrays in order,
//     numbers by float64 value with -0 as 0, every value tagged with its
//     kind) so that two digests are equal exactly when the trajectories
//     are jsonEqual. ResultSide takes it from a (re-validated) document,
//     StreamSide from a checked stream's case lines and summary without
//     reading a sample, and ReadStreamSide in one pass over a stream with
//     OpenStreamFile's checks but none of its index (one bit a sample and
//     a byte a case while it reads; `adk eval compare` and `--baseline`
//     read jsonl this way), so memory is O(cases) small records (about
//     90 bytes a case) whatever the samples hold. Sides are sorted by
//     case id, so CompareSides is one merge, no map. Compare is
//     CompareSides of two ResultSides: one comparison, the same document
//     and bytes either way. A streamed html page (RenderStreamCompared)
//     shows the comparison as RenderHTML does, inside the page's bound;
//     when the comparison's case rows and the cases do not all fit, the
//     page shows the regressions, then the failed cases, then the other
//     rows, then the passed cases, each only once everything before it
//     fitted, under a note per table with its counts (a user opens the
//     page for what regressed and why; every row is in `adk eval
//     compare`'s document). Only a page without any row over the bound
//     is export_byte_limit_exceeded (reason page). `adk eval run
//     --baseline --format html` takes this page also when its result
//     fits one document but the page does not.
//  17. Comparison reports of any size. A comparison has a row per
//     baseline case, so at 100,000 cases with long case ids its json or
//     markdown passes the 16 MiB of one document (a 38-byte id is
//     enough for json). Render still refuses it
//     (export_byte_limit_exceeded: all formats share one ceiling, §5.10);
//     WriteComparison and WriteCompareSidesReport write the same bytes a
//     case row at a time (the head and tail around the rows rendered
//     first, each row encoded into one reused buffer: no allocation a
//     row), and past the bound they write the same document whole
//     instead of refusing it. json stays one document, not JSON Lines as
//     for a result: a result has the jsonl stream as its own form of any
//     size, a comparison has none, and its rows are small (~130 bytes
//     and the id), so the document is a few times the bound at most and
//     any JSON reader (jq, a CI script reading "passed") takes it.
//     DecodeComparison reads one document of at most 16 MiB (and builds
//     its generic tree); ReadComparison reads one of any size (at most
//     MaxComparisonReadBytes) a row at a time: it scans the top-level
//     object key by key, cuts each row out (at most 8 MiB), decodes and
//     checks it alone exactly as DecodeComparison checks the rows
//     (jsonlimit's limits and strict decoding, its re-encoding's key set,
//     order, verdict and reason against the row before), then the other
//     fields together and the verdict; the two accept the same documents
//     (FuzzReadComparison), and its errors name the row
//     ($.case_diffs[12].regression). It holds the rows (about 80 bytes
//     and the id a row) and one row's bytes. `adk eval report` of a
//     comparison file over 16 MiB reads it this way and renders json and
//     markdown a row at a time, html as a page, like one that fits.
//     markdown is a table, written
//     whole. html stays a page: RenderComparisonPage is RenderHTML of a
//     comparison alone that, over the bound, shows the regressions, then
//     the other rows, as many as fit, under the note with the counts, as
//     a streamed page's comparison does (16.). The CLI (`adk eval
//     compare`, `adk eval run --baseline`, `adk eval report` of a saved
//     comparison) always writes a comparison this way, so under the
//     bound its output is the same bytes as before, and past it stderr
//     says how far.
//  18. Statistics of results of any size. `adk eval stats` reads of a
//     result its case counts, each case's pass outcome and every ok score
//     of each metric in document order (case, sample, the sample's
//     criteria, then its turns' metrics): a StatsSeries. The statistics
//     need the scores themselves, not running sums: the mean and then
//     Σ(x − mean)² are summed in that order (the contract's two-pass
//     formulas), and a series is cut to its first (an interval) or last
//     (the gate) MaxStatisticsSamples in that order, so the same bytes
//     for a stream whose samples come in finish order need the values
//     put back in order. ReadStreamSeries reads a stream once with
//     ReadStreamSide's checks (plus: a sample's metric ids are the
//     summary's, unknown_metric) and keeps 10 bytes an ok score (the
//     value and its metric) and 8 bytes a sample (where its scores are)
//     while reading, then 8 bytes an ok score in order, and one bit a
//     case; never a sample, at most MaxStreamStatsScores scores
//     (too_many_scores). A 100,000-case stream of one sample and three
//     single-turn metrics is about 5 MB at the peak. StatsBuilder takes
//     the results one at a time and keeps of the earlier ones their
//     intervals and the most recent MaxStatisticsSamples outcomes and
//     scores a metric that the gate pools, so the CLI holds one result
//     at a time. A stream's statistics are therefore the same bytes as
//     its document's, which TestStatsReport_StreamEqualsDocument and
//     FuzzReadStreamSeries hold.
//  19. How the stream checks decode a line. OpenStreamFile,
//     ReadStreamSide and ReadStreamSeries decode every sample and case
//     line (100,000 of each for a 100,000-case compare side), but read
//     only identities, verdicts, counts, metric results and a case's
//     trajectory. They decode into mirror types (streamscan.go: the
//     result types' fields, names and tags, with stand-ins that check
//     only the JSON type of what they do not read, such as metadata,
//     turn inputs and outputs, events and step args) with a decoder of
//     their own (streamscandec.go) that does exactly what
//     jsonlimit.Check and then encoding/json with DisallowUnknownFields
//     and UseNumber do for those types, in one pass over the line
//     without reflection: it reads the line through a jsonlimit.Scanner,
//     which enforces every limit and rule of Check (size, depth, nodes,
//     string lengths, list and object sizes, repeated keys, UTF-8,
//     syntax) in Check's order with Check's errors as the decoder goes,
//     and checks without building what the types do not read. A line the
//     types refuse is checked again whole by jsonlimit.Check, so that a
//     limit or syntax error after the point where decoding stopped is
//     still the line's error, as when Check ran first; only refused
//     lines pay for it. Strictness is unchanged:
//     TestScanTypes_MirrorTheResultTypes keeps the types in step,
//     FuzzScanLineDecoder holds the decoder to Check's errors and
//     encoding/json's verdicts and values on any input (under the
//     stream's limits and tight ones), FuzzScanner holds the Scanner to
//     Check, and TestStreamChecks_RefuseWhatTheResultDecoderRefuses to
//     ReadStream's. A 100,000-case compare went from ~95 to ~40 µs CPU a
//     case with the decoder after Check, to ~21 µs in one pass, and to
//     ~18 µs with a case line's trajectory digested from its generic
//     values without a JSON round trip (bench/RESULTS.md). Rendering (StreamFile.Cases) and ReadStream
//     still decode the full types.
//
// # Metrics beyond the criteria (§5.8, §5.12)
//
// NewBuiltinMetric builds the provider-free latency, cost, safety and
// semantic_quality metrics, turn or case scope; missing data is
// not_evaluated with a reason (safety_unavailable is ours: the contract
// names no reason for absent safety_violations, and guessing 0 would pass
// an adapter that reports nothing). Case-scope latency is the mean of the
// turns' scores (the contract vector), case cost and safety sum the turns
// and need every turn to report.
//
// NewJudge builds the LLM rubric judge (Judge.Metric makes it a case
// metric of kind judge). Its config is closed and bounded as in §5.8 and
// every failure is an *Error {Code: "llm_judge", Reason: <contract code>}
// that scores as error. The request is a system message plus a user
// message carrying canonical JSON {rubric_id, rubric_version, rubric,
// evaluation_case} framed as untrusted data, at temperature 0 with a
// forced {score, rationale} JSON schema; the answer must be exactly that
// object. The case is secret-pruned and redacted before it leaves, and
// the rationale is redacted with the provider config's secret-named
// values and the API key variables' values. Each call runs on its
// caller's goroutine with its own deadline (request_timeout_ms, retries
// included): no worker goroutine, no global lock, so independent judges
// run concurrently. A success after the deadline is request_timeout; a
// caller that cancels gets provider_request_failed wrapping
// context.Canceled. request_max_heap_words is accepted and validated but
// has no effect (a BEAM knob; MaxOutputBytes and a response cap of 4 ×
// that + 64 KiB bound memory). The provider, model and provider_config
// come from a JudgeConfig built in Go or, for criteria files, from the
// machine's ModelEnv; credentials come only from environment variables
// (or a literal api_key a Go caller puts in provider_config). A test
// injects a deterministic provider with ModelEnv.NewProvider.
//
// # Criteria files
//
// ParseCriteriaWithOptions (see its doc) accepts the six criteria, the
// four built-in metrics and llm_judge with its rubric and bounds only. A
// file can never name code, a provider, a model, provider settings or a
// credential; an llm_judge entry needs CriteriaOptions.Judge, the
// machine's ModelEnv, and ParseCriteria (no options) refuses it.
//
// # Statistics, ensembles, review, simulation (§5.13, §5.14)
//
// Summarize, ConfidenceInterval, WilsonInterval and LongitudinalGate use
// the sample σ and only the 0.90/0.95/0.99 levels, with the contract's
// vectors. AggregateVotes, CalibrateThreshold and ApplyCalibration work on
// persisted votes and never call a provider. Review is a value-typed state
// machine: every transition checks the expected revision and returns a
// new revision; time is an argument. RunSimulation drives a UserSimulator,
// the agent Session and an optional EnvironmentSimulator (each agent tool
// call is an effect) on the caller's goroutine, with a step ceiling, a
// deadline per callback and plain-JSON, size-bounded crossings.
// ScenarioAdapter turns a case whose turn input is a scenario into one
// simulated conversation; LLMUser plays a persona with a goal through the
// same providers as the judge.
//
// # Google ADK import
//
// LoadSet detects the shape. An object with eval_set_id / eval_cases is a
// Google EvalSet (snake_case or camelCase keys): each eval case becomes a
// case (id = eval_id, session_input kept), each invocation a turn (id =
// invocation_id, or turn-N), input = the user_content text when every part
// is text (joined without separator, as model.Message.Text does) else the
// Content without null fields, expected = {response: final_response text,
// trajectory: intermediate_data.tool_uses (or the function_call parts of
// invocation_events) as {tool, args}, intermediate_responses}. Cases with a
// conversation_scenario (user simulator) are refused
// (unsupported_google_adk_eval_case). A JSON list of {query,
// expected_tool_use, reference} is the legacy .test.json format: one case
// whose turns are the list items, named after LoadOptions.SourceName. The
// converted set's version is "google-adk-" + 16 hex digits of the SHA-256
// of the source document's canonical JSON, so an edited file is a new
// revision with new sample ids. Rubrics, final_session_state and
// app_details are not carried over.
package evalengine
