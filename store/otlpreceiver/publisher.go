package otlpreceiver

import (
	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/observability"
)

// Publisher template of the receiver's bus.PublisherPool. The bus
// defaults (32 signals per batch, 4096 queued, 2 in flight) suit an agent
// process's trickle of spans; an OTLP exporter sends hundreds of spans per
// request (telemetrygen and the Go SDK's batch span processor: 512), and
// several exporters at once.
const (
	// PublisherBatchSize is the most spans in one ADK_SIGNALS message.
	// Batches grow with load (a batch leaves as soon as an in-flight slot
	// is free), so a trickle still goes out at once; under load, fewer
	// and larger messages cut the per-message cost in JetStream and in
	// the store node. 512 mapped spans are ~170 KiB, under the
	// publisher's 512 KiB MaxBatchBytes and the stream's 1 MiB
	// MaxMsgSize.
	PublisherBatchSize = 512
	// PublisherMaxQueueEvents and PublisherMaxQueueBytes bound a
	// principal's queue: 64 requests of 512 spans absorb a burst from a
	// few exporters before the receiver answers 503, and they bound the
	// memory a principal can hold (a mapped span is ~350 bytes).
	PublisherMaxQueueEvents = 32 << 10
	PublisherMaxQueueBytes  = 32 << 20
	// PublisherMaxInflight is the unacknowledged batches per principal.
	PublisherMaxInflight = 4
)

// PublisherConfig is the template configuration for the receiver's
// publisher pool; metrics may be nil.
func PublisherConfig(metrics *observability.Metrics) bus.PublisherConfig {
	return bus.PublisherConfig{
		MaxQueueEvents:     PublisherMaxQueueEvents,
		MaxQueueBytes:      PublisherMaxQueueBytes,
		BatchSize:          PublisherBatchSize,
		MaxInflightBatches: PublisherMaxInflight,
		Metrics:            metrics,
	}
}
