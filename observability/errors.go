package observability

import "errors"

var (
	// ErrTraceparentNotFound means the headers carry no traceparent: the
	// caller starts a new root trace.
	ErrTraceparentNotFound = errors.New("traceparent not found")
	// ErrDuplicateTraceparent means more than one traceparent value arrived
	// (the contract's duplicate_header).
	ErrDuplicateTraceparent = errors.New("duplicate_header: more than one traceparent")
	// ErrIncompleteSpan is returned by the OTLP mapping for a start-phase
	// span: only completed spans are exported.
	ErrIncompleteSpan = errors.New("incomplete_span: start signals are not exported")
	// ErrContentNotExportable is returned by the OTLP mapping for a v1
	// envelope that carries captured content
	// (content_bearing_envelope_not_exportable).
	ErrContentNotExportable = errors.New("content_bearing_envelope_not_exportable")
	// ErrAsyncWithExporters means a Config set both an async sink and sync
	// exporters: in async mode the sink owns its exporters.
	ErrAsyncWithExporters = errors.New("observability: async delivery refuses per-tracer exporters")
	// ErrTwoSinks means a Config set both Async and Records: a tracer
	// delivers each signal one way.
	ErrTwoSinks = errors.New("observability: a tracer takes an async sink or a record sink, not both")
	// ErrIncompatibleBatchTimeout means an explicit bus batch timeout does not
	// exceed the sum of its exporters' timeouts plus 250 ms.
	ErrIncompatibleBatchTimeout = errors.New("incompatible_batch_timeout")
)
