package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/fadcedab/adk/evalengine"
)

// The resume journal of `adk eval run` (issue 16): the run's finished
// samples in the sample stream format (evalengine's stream.go, now in
// internal/evalcore: the one format for journals and the jsonl report),
// written beside --output as OUTPUT.journal.jsonl while the run goes.
// Decisions where the issue is silent:
//
//   - Only a run with --output FILE keeps a journal (it is "next to
//     --output"); a stdout-only run has none and says so when interrupted.
//   - A journal that already exists is never overwritten: a fresh run
//     refuses with eval_journal_exists (continue it with --resume, or
//     delete it), so paid model calls are never thrown away silently.
//   - The journal is removed once every sample finished and the report
//     was written. It stays when the run was interrupted, when --timeout
//     cut samples off (they are not journaled: a resume runs them), and
//     when the report could not be rendered or written (then a resume
//     with another --format costs no model call).
//   - Digests: config is the AGENT.json bytes (or the --agent-url),
//     eval_set the canonical set (so a Google file and its conversion are
//     the same set), criteria the criteria file bytes plus the judge
//     config bytes, options the per-sample options (samples,
//     capture_events, capture_tool_content). Everything else (concurrency,
//     timeouts, thresholds, format, baseline) may change on resume.
//   - A resumed run appends to the journal it was given, whatever
//     --output says.
//   - The journal is bounded (maxJournalBytes); past it, later samples
//     are not journaled (one warning on stderr) and the run goes on.

// maxJournalBytes bounds a journal: 100,000 cases × 5 samples of ~4 KiB
// fit.
const maxJournalBytes = 4 << 30

// Error codes of the journal.
const (
	codeJournalExists      = "eval_journal_exists"
	codeJournalMismatch    = "resume_journal_mismatch"
	codeInvalidJournal     = "invalid_resume_journal"
	codeJournalWriteFailed = "eval_journal_write_failed"
)

// journalSuffix names the journal beside --output.
const journalSuffix = ".journal.jsonl"

// runDigests identifies what a journal's samples belong to.
func runDigests(cfgData []byte, agentURL string, set *evalengine.Set, criteria, judge []byte, opts evalengine.Options) (map[string]string, error) {
	sum := func(parts ...[]byte) string {
		h := sha256.New()
		for _, p := range parts {
			fmt.Fprintf(h, "%d:", len(p))
			h.Write(p)
		}
		return "sha256:" + hex.EncodeToString(h.Sum(nil))
	}
	setJSON, err := json.Marshal(set)
	if err != nil {
		return nil, &cliError{Code: codeEvaluationFailed, Reason: "eval_set_digest", Err: err}
	}
	optJSON, _ := json.Marshal(struct {
		Samples            int  `json:"sample_count"`
		CaptureEvents      bool `json:"capture_events"`
		CaptureToolContent bool `json:"capture_tool_content"`
	}{opts.Samples, opts.CaptureEvents, opts.CaptureToolContent})
	cfg := cfgData
	if agentURL != "" {
		cfg = []byte("agent-url:" + agentURL)
	}
	return map[string]string{
		"config":   sum(cfg),
		"eval_set": sum(setJSON),
		"criteria": sum(criteria, judge),
		"options":  sum(optJSON),
	}, nil
}

// evalJournal is one run's journal. record is called by the engine one
// sample at a time; the counters feed the partial report.
type evalJournal struct {
	path     string
	f        *os.File
	sw       *evalengine.StreamWriter
	finished []evalengine.StreamSample
	total    int
	stderr   io.Writer

	fresh    bool // created by this run (not --resume)
	complete bool // --resume named a complete stream: never removed

	// The flusher writes out a pending batch within flushEvery even when
	// no further sample finishes (a crash then loses at most that much).
	stopFlush chan struct{}
	flushDone chan struct{}

	mu                    sync.Mutex
	done, passed, errored int
	failed                bool // writing failed or hit the bound: warned once
}

// openJournal starts the run's journal: a new one beside --output, or the
// one --resume names (checked against digests). It returns nil when the
// run keeps none (no --output file).
func openJournal(resume, output string, stderr io.Writer, set *evalengine.Set, samples int, digests map[string]string) (*evalJournal, error) {
	j := &evalJournal{total: len(set.Cases) * samples, stderr: stderr}
	if resume == "" {
		if output == "" || output == "-" {
			return nil, nil
		}
		j.path = output + journalSuffix
		f, err := os.OpenFile(j.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, os.ErrExist) {
			return nil, &cliError{Code: codeJournalExists, Detail: j.path + ": continue it with --resume " + j.path + ", or delete it"}
		}
		if err != nil {
			// The report could not be written there either: fail before
			// any model call, with the report's code.
			return nil, writeFailed(err)
		}
		j.fresh = true
		h := evalengine.NewStreamHeader(set, samples, digests)
		sw, err := evalengine.NewStreamWriter(f, &h, 0, maxJournalBytes)
		if err != nil {
			_ = f.Close()
			_ = os.Remove(j.path)
			return nil, &cliError{Code: codeJournalWriteFailed, Reason: err.Error(), Err: err}
		}
		j.f, j.sw = f, sw
		j.startFlusher()
		return j, nil
	}
	j.path = resume
	f, err := os.OpenFile(resume, os.O_RDWR, 0)
	if err != nil {
		return nil, unreadable("resume", resume, err)
	}
	st, err := evalengine.ReadStream(io.LimitReader(f, maxJournalBytes+1))
	if err != nil {
		_ = f.Close()
		var ee *evalengine.Error
		if errors.As(err, &ee) {
			return nil, &cliError{Code: codeInvalidJournal, Reason: ee.Reason, Detail: ee.Detail, Err: err}
		}
		return nil, &cliError{Code: codeInvalidJournal, Err: err}
	}
	if st.Size > maxJournalBytes {
		_ = f.Close()
		return nil, tooLarge("resume", maxJournalBytes)
	}
	h := &st.Header
	if h.EvalSetID != set.ID || h.EvalSetVersion != set.Version || h.CaseCount != len(set.Cases) {
		_ = f.Close()
		return nil, &cliError{Code: codeJournalMismatch, Reason: "eval_set", Detail: "the journal is of another eval set"}
	}
	for _, k := range []string{"config", "eval_set", "criteria", "options"} {
		if h.Digests[k] != digests[k] {
			_ = f.Close()
			return nil, &cliError{Code: codeJournalMismatch, Reason: k, Detail: "run with the " + journalFlagOf(k) + " the journal was started with"}
		}
	}
	if h.SampleCount != samples {
		_ = f.Close()
		return nil, &cliError{Code: codeJournalMismatch, Reason: "options", Detail: "run with the --samples the journal was started with"}
	}
	j.finished = st.Samples
	for _, s := range st.Samples {
		j.count(&s.Sample)
	}
	if st.Summary != nil {
		// A complete stream (a jsonl report): nothing runs, nothing is
		// appended, and the file is the user's report: it stays.
		_ = f.Close()
		j.complete = true
		return j, nil
	}
	// Drop a torn last line (a crash mid-write) before appending.
	if err := f.Truncate(st.Size); err != nil {
		_ = f.Close()
		return nil, &cliError{Code: codeJournalWriteFailed, Reason: err.Error(), Err: err}
	}
	if _, err := f.Seek(st.Size, io.SeekStart); err != nil {
		_ = f.Close()
		return nil, &cliError{Code: codeJournalWriteFailed, Reason: err.Error(), Err: err}
	}
	sw, err := evalengine.NewStreamWriter(f, nil, st.Size, maxJournalBytes)
	if err != nil {
		_ = f.Close()
		return nil, &cliError{Code: codeJournalWriteFailed, Reason: err.Error(), Err: err}
	}
	j.f, j.sw = f, sw
	j.startFlusher()
	return j, nil
}

// flushEvery bounds how long a finished sample waits in the journal's
// buffer.
const flushEvery = 200 * time.Millisecond

// startFlusher starts the goroutine close stops.
func (j *evalJournal) startFlusher() {
	j.stopFlush, j.flushDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(j.flushDone)
		t := time.NewTicker(flushEvery)
		defer t.Stop()
		for {
			select {
			case <-j.stopFlush:
				return
			case <-t.C:
				_ = j.sw.Flush()
			}
		}
	}()
}

func journalFlagOf(digest string) string {
	switch digest {
	case "config":
		return "--config (or --agent-url)"
	case "eval_set":
		return "--eval-set"
	case "criteria":
		return "--criteria and --judge-config"
	}
	return "--samples, --capture-events and --capture-tool-content"
}

func (j *evalJournal) count(s *evalengine.SampleResult) {
	j.done++
	switch {
	case s.Status == evalengine.SampleStatusError:
		j.errored++
	case s.Passed:
		j.passed++
	}
}

// record is the engine's OnSample: journal the finished sample.
func (j *evalJournal) record(ci int, s *evalengine.SampleResult) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.count(s)
	if j.sw == nil || j.failed {
		return
	}
	if err := j.sw.WriteSample(ci, s); err != nil {
		j.failed = true
		if errors.Is(err, evalengine.ErrStreamFull) {
			fmt.Fprintf(j.stderr, "adk: warning: the journal %s reached its %d-byte bound; later samples are not journaled\n", j.path, int64(maxJournalBytes))
		} else {
			fmt.Fprintf(j.stderr, "adk: warning: the journal %s cannot be written (%v); later samples are not journaled\n", j.path, err)
		}
	}
}

// hasFailed says whether a sample could not be journaled.
func (j *evalJournal) hasFailed() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.failed
}

// close writes out and closes the journal, keeping the file.
func (j *evalJournal) close() {
	if j == nil || j.f == nil {
		return
	}
	if j.stopFlush != nil {
		close(j.stopFlush)
		<-j.flushDone
		j.stopFlush = nil
	}
	_ = j.sw.Flush()
	_ = j.f.Sync()
	_ = j.f.Close()
	j.f = nil
}

// interrupted prints the partial report of a run that ended without a
// result (Ctrl-C, SIGTERM) on stderr, before the error line.
func (j *evalJournal) interrupted(stderr io.Writer, total int) {
	if j == nil {
		fmt.Fprintln(stderr, "adk: interrupted; no journal was kept (run with --output FILE to keep one and resume)")
		return
	}
	j.mu.Lock()
	done, passed, errored := j.done, j.passed, j.errored
	j.mu.Unlock()
	fmt.Fprintf(stderr, "adk: interrupted after %d of %d samples (%d passed, %d failed, %d error)\n",
		done, total, passed, done-passed-errored, errored)
	if j.discardEmpty() {
		return
	}
	j.close()
	fmt.Fprintf(stderr, "adk: journal %s; continue with the same flags and --resume %s\n", j.path, j.path)
}

// discardEmpty removes a journal this run created when it holds no
// sample (nothing to resume); it reports whether it did.
func (j *evalJournal) discardEmpty() bool {
	if j == nil || !j.fresh {
		return false
	}
	j.mu.Lock()
	empty := j.done == 0
	j.mu.Unlock()
	if !empty {
		return false
	}
	j.close()
	_ = os.Remove(j.path)
	return true
}

// finish ends a run that produced a result. cut is the number of samples
// the run's deadline cut off. The journal is removed when the run is
// complete and its report written; otherwise it stays and stderr says how
// to continue.
func (j *evalJournal) finish(stderr io.Writer, reportWritten bool, cut int) {
	if j == nil {
		return
	}
	j.close()
	if j.complete {
		return
	}
	if reportWritten && cut == 0 {
		_ = os.Remove(j.path)
		return
	}
	if cut > 0 {
		fmt.Fprintf(stderr, "adk: %d samples were cut off by --timeout; continue with the same flags and --resume %s\n", cut, j.path)
		return
	}
	fmt.Fprintf(stderr, "adk: every sample is journaled in %s; render it again with --resume %s\n", j.path, j.path)
}

// cutSamples counts the samples of r that the run's deadline cut off
// (timeout or cancelled tags) and were therefore not journaled: the
// engine journals every other finished sample.
func (j *evalJournal) cutSamples() int {
	if j == nil {
		return 0
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return max(0, j.total-j.done)
}

// resumeUsage documents --resume.
const resumeUsage = "continue an interrupted run from its journal (OUTPUT" + journalSuffix + "); the same --config, --eval-set, --criteria and --samples are required"

// scrub makes the journal's lines pass the report's last-line credential
// scrub.
func (j *evalJournal) scrub(secrets []string) {
	if j != nil && j.sw != nil && len(secrets) > 0 {
		j.sw.SetLineFilter(func(b []byte) []byte { return scrubReport(b, secrets) })
	}
}

// evalStream is a `--format jsonl` run that streams (issue 19): every
// sample goes out as it finishes, to the journal (which becomes --output)
// or, without an --output file, straight to stdout; the engine keeps only
// case aggregates (RunConfig.DropSamples), so memory does not grow with
// the set and no 16 MiB document bound applies. Decisions:
//
//   - With a baseline the run renders at the end, as does --resume of a
//     complete stream: the comparison is made once the result is whole
//     (past one document's bound from its stream's case lines,
//     evalbaseline.go).
//   - The stream is the result: samples --timeout cuts off are recorded
//     as timeout, as in any report, and are not run again on resume.
//   - stdout and --output hold the same bytes; with --output the file is
//     written first (the journal renamed into place once the summary is
//     in), then copied to stdout.
type evalStream struct {
	sw      *evalengine.StreamWriter
	journal *evalJournal // nil when streaming to stdout
}

// startStream returns the run's stream, or nil when the run renders its
// report at the end.
func (f *evalRunFlags) startStream(stdout io.Writer, j *evalJournal, set *evalengine.Set, samples int, digests map[string]string, secrets []string) (*evalStream, error) {
	if f.format != evalengine.FormatJSONL || f.baseline != "" || (j != nil && j.complete) {
		return nil, nil
	}
	if j != nil {
		return &evalStream{sw: j.sw, journal: j}, nil
	}
	h := evalengine.NewStreamHeader(set, samples, digests)
	sw, err := evalengine.NewStreamWriter(stdout, &h, 0, 0)
	if err != nil {
		return nil, &cliError{Code: codeReportWriteFailed, Reason: "stdout", Err: err}
	}
	if len(secrets) > 0 {
		sw.SetLineFilter(func(b []byte) []byte { return scrubReport(b, secrets) })
	}
	return &evalStream{sw: sw}, nil
}

func (s *evalStream) record(ci int, r *evalengine.SampleResult) {
	if s.journal != nil {
		s.journal.record(ci, r)
		return
	}
	_ = s.sw.WriteSample(ci, r) // a closed stdout shows at the summary
}

// finish appends the summary, puts the stream in place and gives the
// verdict.
func (s *evalStream) finish(stdout io.Writer, output string, result *evalengine.Result) error {
	if err := s.sw.WriteSummary(result); err != nil {
		if s.journal != nil {
			s.journal.close()
			return &cliError{Code: codeReportWriteFailed, Reason: "journal", Detail: s.journal.path + ": " + err.Error(), Err: err}
		}
		return &cliError{Code: codeReportWriteFailed, Reason: "stdout", Err: err}
	}
	if err := s.sw.Flush(); err != nil {
		return &cliError{Code: codeReportWriteFailed, Reason: "stdout", Err: err}
	}
	if j := s.journal; j != nil {
		j.mu.Lock()
		failed := j.failed
		j.mu.Unlock()
		j.close()
		if failed {
			return &cliError{Code: codeReportWriteFailed, Reason: "journal", Detail: j.path + " is missing samples (see the warning above)"}
		}
		path := j.path
		if output != "" && output != "-" && output != path {
			if err := os.Rename(path, output); err != nil {
				return writeFailed(err)
			}
			path = output
		}
		j.complete = true // it is the report now: never removed
		in, err := os.Open(path)
		if err != nil {
			return writeFailed(err)
		}
		defer in.Close()
		if _, err := io.Copy(stdout, in); err != nil {
			return &cliError{Code: codeReportWriteFailed, Reason: "stdout", Err: err}
		}
	}
	if !result.Passed {
		return &exitCodeError{Code: exitFailed}
	}
	return nil
}
