package otlpreceiver

import (
	"github.com/fadcedab/adk/bus"
	"github.com/fadcedab/adk/observability"
)

// PublisherConfig is the template configuration for the receiver's
// publisher pool: bus.HighRatePublisherConfig, since an OTLP exporter
// sends hundreds of spans per request (telemetrygen and the Go SDK's
// batch span processor: 512), and several exporters at once. metrics may
// be nil.
func PublisherConfig(metrics *observability.Metrics) bus.PublisherConfig {
	return bus.HighRatePublisherConfig(metrics)
}
