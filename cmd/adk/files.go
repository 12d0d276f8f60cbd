package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/fadcedab/adk/evalengine"
)

// CLI error codes that are not the engine's (CONTRACTS §5.11). The
// engine's own codes are printed as they are.
const (
	codeMissingRequired        = "missing_required_options"
	codeInvalidPositiveInt     = "invalid_positive_integer"
	codeInvalidFraction        = "invalid_fraction"
	codeInvalidBoolean         = "invalid_boolean"
	codeInvalidEmptyCriteria   = "invalid_empty_criteria_policy"
	codeInvalidOutputPath      = "invalid_eval_output_path"
	codeBaselineRequired       = "baseline_required_for_comparison_options"
	codeFileTooLarge           = "eval_file_too_large"
	codeFileUnreadable         = "eval_file_unreadable"
	codeInvalidAgentConfig     = "invalid_agent_config"
	codeInvalidAgentURL        = "invalid_agent_url"
	codeConflictingOptions     = "conflicting_options"
	codeBaselineMustBeObject   = "eval_baseline_must_be_object"
	codeInvalidBaseline        = "invalid_eval_baseline"
	codeEvaluationFailed       = "evaluation_failed"
	codeComparisonFailed       = "baseline_comparison_failed"
	codeReportRenderFailed     = "report_render_failed"
	codeReportWriteFailed      = "report_write_failed"
	codeInvalidEvalReportInput = "invalid_eval_report_input"
)

// File size caps (CONTRACTS §5.11).
const (
	maxSetFileBytes    = 16 << 20 // eval sets, baselines, saved results
	maxConfigFileBytes = 1 << 20  // AGENT.json, criteria, tolerances
)

// cliError is the one-line typed error of the eval commands: a contract
// code, an optional nested reason (the tuple form {code, reason}) and a
// short detail. It never carries file contents.
type cliError struct {
	Code   string
	Reason string
	Detail string
	Err    error
}

func (e *cliError) Error() string {
	var b strings.Builder
	b.WriteString(e.Code)
	if e.Reason != "" {
		b.WriteString(": ")
		b.WriteString(e.Reason)
	}
	if e.Detail != "" {
		b.WriteString(" (")
		b.WriteString(e.Detail)
		b.WriteString(")")
	}
	return b.String()
}

func (e *cliError) Unwrap() error { return e.Err }

// engineError turns an evalengine error into a cliError. With wrap set it
// becomes {wrap, engine code[:reason]}; without, the engine's code stands.
func engineError(wrap string, err error) error {
	var ee *evalengine.Error
	if !errors.As(err, &ee) {
		if wrap == "" {
			wrap = codeEvaluationFailed
		}
		return &cliError{Code: wrap, Reason: "internal_error", Err: err}
	}
	if wrap == "" {
		return &cliError{Code: ee.Code, Reason: ee.Reason, Detail: ee.Detail, Err: err}
	}
	reason := ee.Code
	if ee.Reason != "" {
		reason += ": " + ee.Reason
	}
	return &cliError{Code: wrap, Reason: reason, Detail: ee.Detail, Err: err}
}

// readCapped reads a whole input file of at most limit bytes. The size is
// checked on the open file before reading, and the read itself is bounded,
// so a file that grows (or a pipe) cannot make it allocate more.
func readCapped(name, path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, unreadable(name, path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, unreadable(name, path, err)
	}
	if st.IsDir() {
		return nil, &cliError{Code: codeFileUnreadable, Reason: name, Detail: path + ": is a directory"}
	}
	if st.Mode().IsRegular() && st.Size() > limit {
		return nil, tooLarge(name, limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, unreadable(name, path, err)
	}
	if int64(len(data)) > limit {
		return nil, tooLarge(name, limit)
	}
	return data, nil
}

func tooLarge(name string, limit int64) error {
	return &cliError{Code: codeFileTooLarge, Reason: name, Detail: "over " + strconv.FormatInt(limit, 10) + " bytes"}
}

func unreadable(name, path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return &cliError{Code: codeFileUnreadable, Reason: name, Detail: path + ": " + err.Error(), Err: err}
}

// checkOutputPath validates --output: "-" is stdout; a path must be
// non-empty and free of NUL bytes.
func checkOutputPath(p string) error {
	if p == "" || strings.IndexByte(p, 0) >= 0 {
		return &cliError{Code: codeInvalidOutputPath}
	}
	return nil
}

// writeAtomic writes data to path through a temporary file in the same
// directory: write, fsync, rename, then fsync the directory. On any
// failure the temporary file is removed and path is untouched, so there is
// never a partial report.
func writeAtomic(path string, data []byte) error {
	return writeAtomicFunc(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}, nil)
}

// writeAtomicFunc is writeAtomic with the content written by write (a
// streamed report); before the rename, done (if set) may read the written
// file back (to copy it to stdout). A failure of write or done leaves
// path untouched; a *cliError from write is returned as is.
func writeAtomicFunc(path string, write func(io.Writer) error, done func(*os.File) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return writeFailed(err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	if err = write(f); err != nil {
		_ = f.Close()
		var ce *cliError
		if errors.As(err, &ce) {
			return err
		}
		return writeFailed(err)
	}
	if err = f.Chmod(0o644); err != nil {
		_ = f.Close()
		return writeFailed(err)
	}
	if err = f.Sync(); err != nil {
		_ = f.Close()
		return writeFailed(err)
	}
	if done != nil {
		if _, err = f.Seek(0, io.SeekStart); err == nil {
			err = done(f)
		}
		if err != nil {
			_ = f.Close()
			return err
		}
	}
	if err = f.Close(); err != nil {
		return writeFailed(err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return writeFailed(err)
	}
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync() // best effort: the rename is already visible
		_ = d.Close()
	}
	return nil
}

func writeFailed(err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		err = fmt.Errorf("%s %s: %w", pe.Op, pe.Path, pe.Err)
	case errors.As(err, &le):
		err = fmt.Errorf("rename: %w", le.Err)
	}
	return &cliError{Code: codeReportWriteFailed, Reason: err.Error(), Err: err}
}

// emitReport writes the rendered bytes: to the file (atomically) when
// output names one, and to stdout in every case, so stdout and the file
// hold the same bytes. The file is written first; if that fails, stdout
// gets nothing.
func emitReport(stdout io.Writer, output string, data []byte) error {
	if output != "" && output != "-" {
		if err := writeAtomic(output, data); err != nil {
			return err
		}
	}
	if _, err := stdout.Write(data); err != nil {
		return &cliError{Code: codeReportWriteFailed, Reason: "stdout", Err: err}
	}
	return nil
}
