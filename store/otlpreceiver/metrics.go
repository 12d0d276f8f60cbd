package otlpreceiver

import "github.com/prometheus/client_golang/prometheus"

// MetricReceiverEvents is the Prometheus counter of the receiver's
// outcomes, labelled by outcome (the Stats JSON names).
const MetricReceiverEvents = "adk_otlp_receiver_events_total"

var receiverEventsDesc = prometheus.NewDesc(MetricReceiverEvents,
	"OTLP/HTTP receiver requests and spans by outcome.", []string{"outcome"}, nil)

// Collector exposes Stats as Prometheus counters; register it on the
// registry that serves /metrics.
func (r *Receiver) Collector() prometheus.Collector { return collector{r} }

type collector struct{ r *Receiver }

func (c collector) Describe(ch chan<- *prometheus.Desc) { ch <- receiverEventsDesc }

func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := c.r.Stats()
	for _, o := range []struct {
		name string
		v    uint64
	}{
		{"requests", s.Requests}, {"unauthorized", s.Unauthorized}, {"malformed", s.Malformed},
		{"too_large", s.TooLarge}, {"unsupported_media", s.UnsupportedMedia}, {"unavailable", s.Unavailable},
		{"spans_received", s.SpansReceived}, {"spans_accepted", s.SpansAccepted}, {"spans_rejected", s.SpansRejected},
		{"spans_backpressured", s.SpansBackpressured}, {"content_attributes_dropped", s.ContentAttributesDropped},
	} {
		ch <- prometheus.MustNewConstMetric(receiverEventsDesc, prometheus.CounterValue, float64(o.v), o.name)
	}
}
