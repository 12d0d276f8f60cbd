package observability

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Exporter delivers one signal. It must honour ctx (its deadline is the
// descriptor's timeout) and be idempotent: an async bus may retry it.
type Exporter interface {
	Export(ctx context.Context, s Signal) error
}

// ExporterFunc adapts a function to Exporter.
type ExporterFunc func(ctx context.Context, s Signal) error

// Export implements Exporter.
func (f ExporterFunc) Export(ctx context.Context, s Signal) error { return f(ctx, s) }

// FailurePolicy says what an exporter failure does to the rest of a
// delivery.
type FailurePolicy string

// Failure policies.
const (
	// FailOpen (the default) records the failure and runs later exporters.
	FailOpen FailurePolicy = "open"
	// FailClosed stops the delivery with an *ExporterFailedError.
	FailClosed FailurePolicy = "closed"
)

// Exporter descriptor limits (CONTRACTS §2.6).
const (
	MaxExporters          = 64
	MaxExporterIDBytes    = 128
	DefaultExportTimeout  = time.Second
	MaxExportTimeout      = 30 * time.Second
	DeploymentExporterID  = "adk-deployment-otlp"
	exportReasonTimeout   = "timeout"
	exportReasonPanic     = "panic"
	exportReasonFailed    = "exporter_failed"
	deliveryReasonDropped = "dropped"
)

// ExporterDescriptor names one sync exporter and its bounds.
type ExporterDescriptor struct {
	// ID is 1..128 bytes and unique within a list.
	ID       string
	Exporter Exporter
	// Timeout bounds one Export call: default 1s, at most 30s.
	Timeout time.Duration
	// FailurePolicy defaults to FailOpen.
	FailurePolicy FailurePolicy
}

func (d ExporterDescriptor) timeout() time.Duration {
	if d.Timeout == 0 {
		return DefaultExportTimeout
	}
	return d.Timeout
}

// DescriptorError rejects an exporter list before any export
// (invalid_exporter_descriptor).
type DescriptorError struct {
	Index  int // -1 for the list itself
	Reason string
}

// Error implements error.
func (e *DescriptorError) Error() string {
	return fmt.Sprintf("invalid_exporter_descriptor: %d: %s", e.Index, e.Reason)
}

// ValidateExporters checks a whole descriptor list: at most 64, ids 1..128
// bytes and unique, an exporter, a timeout in (0, 30s] and a known policy.
func ValidateExporters(ds []ExporterDescriptor) error {
	if len(ds) > MaxExporters {
		return &DescriptorError{Index: -1, Reason: "too_many_exporters"}
	}
	seen := make(map[string]bool, len(ds))
	for i, d := range ds {
		switch {
		case len(d.ID) == 0 || len(d.ID) > MaxExporterIDBytes:
			return &DescriptorError{i, "invalid_id"}
		case seen[d.ID]:
			return &DescriptorError{i, "duplicate_id"}
		case d.Exporter == nil:
			return &DescriptorError{i, "missing_exporter"}
		case d.Timeout < 0 || d.Timeout > MaxExportTimeout:
			return &DescriptorError{i, "invalid_timeout"}
		case d.FailurePolicy != "" && d.FailurePolicy != FailOpen && d.FailurePolicy != FailClosed:
			return &DescriptorError{i, "invalid_failure_policy"}
		}
		seen[d.ID] = true
	}
	return nil
}

// ExportStatus is one exporter's result within a delivery.
type ExportStatus struct {
	ID        string
	OK        bool
	Reason    string // structural: timeout, panic, exporter_failed or the exporter's code
	Retryable bool
}

// ExporterFailedError is a fail-closed exporter's failure
// ({exporter_failed, Id, Reason}).
type ExporterFailedError struct {
	ID     string
	Reason string
}

// Error implements error.
func (e *ExporterFailedError) Error() string {
	return "exporter_failed: " + e.ID + ": " + e.Reason
}

// coder is implemented by structured errors with a stable code.
type coder interface{ Code() string }

// retryabler is implemented by errors that know whether a retry may help.
type retryabler interface{ Retryable() bool }

// exportReason reduces an exporter error to a structural tag: raw reasons
// are never echoed.
func exportReason(err error) (string, bool) {
	var c coder
	var r retryabler
	retry := false
	if errors.As(err, &r) {
		retry = r.Retryable()
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return exportReasonTimeout, true
	case errors.As(err, &c):
		return c.Code(), retry
	}
	return exportReasonFailed, retry
}

// syncDelivery runs exporters in order, each in its own goroutine so a
// deadline or panic is isolated. The goroutines belong to wg (the Tracer's);
// one that outlives its deadline is abandoned to its cancelled context and
// waited for by Tracer.Close.
type syncDelivery struct {
	exporters []ExporterDescriptor
	wg        *sync.WaitGroup
}

type exportResult struct {
	err      error
	panicked bool
}

// deliver returns every status and, for a fail-closed failure, the error
// that stopped it. The caller's cancellation does not cut an export short:
// the operation is over, only the descriptor deadline applies.
func (d *syncDelivery) deliver(ctx context.Context, s Signal) ([]ExportStatus, error) {
	statuses := make([]ExportStatus, 0, len(d.exporters))
	base := context.WithoutCancel(ctx)
	for _, ex := range d.exporters {
		st := d.runOne(base, ex, s)
		statuses = append(statuses, st)
		if !st.OK && ex.FailurePolicy == FailClosed {
			return statuses, &ExporterFailedError{ID: ex.ID, Reason: st.Reason}
		}
	}
	return statuses, nil
}

func (d *syncDelivery) runOne(base context.Context, ex ExporterDescriptor, s Signal) ExportStatus {
	ctx, cancel := context.WithTimeout(base, ex.timeout())
	defer cancel()
	done := make(chan exportResult, 1)
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer func() {
			if p := recover(); p != nil {
				done <- exportResult{panicked: true}
			}
		}()
		done <- exportResult{err: ex.Exporter.Export(ctx, s)}
	}()
	select {
	case r := <-done:
		switch {
		case r.panicked:
			return ExportStatus{ID: ex.ID, Reason: exportReasonPanic}
		case r.err != nil:
			reason, retry := exportReason(r.err)
			return ExportStatus{ID: ex.ID, Reason: reason, Retryable: retry}
		}
		return ExportStatus{ID: ex.ID, OK: true}
	case <-ctx.Done():
		return ExportStatus{ID: ex.ID, Reason: exportReasonTimeout, Retryable: true}
	}
}

// BatchTimeout resolves an async bus batch timeout against its exporters
// (the deployment bridge rule): an explicit timeout must exceed the sum of
// the exporter timeouts plus 250 ms; zero selects max(5s, sum+251ms),
// capped at 300s.
func BatchTimeout(explicit time.Duration, ds []ExporterDescriptor) (time.Duration, error) {
	const maxBatch = 300 * time.Second
	var sum time.Duration
	for _, d := range ds {
		sum += d.timeout()
	}
	floor := sum + 250*time.Millisecond
	if explicit != 0 {
		if explicit <= floor || explicit > maxBatch {
			return 0, ErrIncompatibleBatchTimeout
		}
		return explicit, nil
	}
	auto := max(5*time.Second, floor+time.Millisecond)
	if auto > maxBatch {
		return 0, ErrIncompatibleBatchTimeout
	}
	return auto, nil
}
