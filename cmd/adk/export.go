package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/fadcedab/adk/devapi"
	"github.com/fadcedab/adk/observability"
	"github.com/fadcedab/adk/store/otlpexport"
)

const codeInvalidExportEndpoint = "invalid_export_endpoint"

func newExportCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Forward the signal stream to other systems",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newExportOTLPCmd())
	return cmd
}

type exportOTLPOptions struct {
	nats        natsFlags
	ops         opsFlags
	listen      listenFlags
	endpoint    string
	name        string
	serviceName string
	timeout     time.Duration
	maxAttempts int
}

func newExportOTLPCmd() *cobra.Command {
	var o exportOTLPOptions
	cmd := &cobra.Command{
		Use:   "otlp",
		Short: "Forward ADK_SIGNALS to an OTLP/HTTP trace backend (Jaeger, Langfuse, Phoenix, a collector)",
		Long: `otlp is a durable JetStream consumer of ADK_SIGNALS (adk-export-<name>) that
sends every completed span to an OTLP/HTTP traces endpoint in protobuf. A
batch is acked only once the backend accepted it, or once its spans were
dropped and counted (a 4xx refusal, or --max-attempts transient failures,
retried with exponential backoff and jitter, honouring Retry-After). A
restart resumes where the consumer stopped; a redelivered span keeps its
trace and span ids, so the backend stores it once.

--endpoint is a base URL (/v1/traces is appended unless the path already
ends with it). Without it: $ADK_OTLP_ENDPOINT, then
$OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (used as is), then
$OTEL_EXPORTER_OTLP_ENDPOINT. Headers (e.g. authorization) come from
$OTEL_EXPORTER_OTLP_HEADERS only, so they never show in a process list;
their values are never printed. Stop with SIGINT or SIGTERM.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tracesURL, err := exportTracesURL(o.endpoint, os.Getenv)
			if err != nil {
				return err
			}
			headers, err := observability.ParseOTLPHeadersEnv(os.Getenv(observability.EnvOTLPHeaders))
			if err != nil {
				return err
			}
			if o.maxAttempts < 1 || o.maxAttempts > 100 {
				return usageError{errors.New("--max-attempts: 1..100")}
			}
			if o.timeout < 100*time.Millisecond || o.timeout > 2*time.Minute {
				return usageError{errors.New("--timeout: 100ms..2m")}
			}
			nc, err := o.nats.connect("adk-export-" + o.name)
			if err != nil {
				return err
			}
			defer nc.Close()
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			startCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			exp, err := otlpexport.Start(startCtx, otlpexport.Config{
				Conn: nc, Name: o.name, TracesURL: tracesURL, Headers: headers, ServiceName: o.serviceName,
				Timeout: o.timeout, MaxAttempts: o.maxAttempts,
				Logger: slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)),
			})
			cancel()
			if err != nil {
				var ce *otlpexport.ConfigError
				if errors.As(err, &ce) {
					return usageError{fmt.Errorf("--%s: %s", ce.Field, ce.Reason)}
				}
				return &cliError{Code: codeClusterUnavailable, Detail: err.Error(), Err: err}
			}
			reg := devapi.NewRegistry()
			register(reg, exportCollectors(exp))
			stopOps, err := o.ops.start(&o.listen, reg, func(context.Context) error { return nil }, cmd.OutOrStdout(), "adk export otlp")
			if err != nil {
				exp.Stop()
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "adk export otlp: consumer %s forwarding %s to %s\n",
				otlpexport.ConsumerName(o.name), "ADK_SIGNALS", tracesURL)
			<-ctx.Done()
			exp.Stop()
			stopOps()
			st := exp.Stats()
			fmt.Fprintf(cmd.OutOrStdout(), "adk export otlp: stopped: %d spans forwarded, %d dropped, %d records skipped\n",
				st.Spans, st.DroppedTotal(), st.Skipped)
			return nil
		},
	}
	o.nats.register(cmd.Flags(), defaultNATSURL)
	cmd.Flags().StringVar(&o.endpoint, "endpoint", "", "OTLP/HTTP base URL, e.g. http://127.0.0.1:4318 (default from the OTLP environment)")
	cmd.Flags().StringVar(&o.name, "name", otlpexport.DefaultName, "exporter name: its durable consumer is adk-export-<name>")
	cmd.Flags().StringVar(&o.serviceName, "service-name", otlpexport.DefaultServiceName, "service.name of spans that carry none")
	cmd.Flags().DurationVar(&o.timeout, "timeout", otlpexport.DefaultTimeout, "bound of one HTTP attempt")
	cmd.Flags().IntVar(&o.maxAttempts, "max-attempts", otlpexport.DefaultMaxAttempts, "attempts per batch before its spans are dropped (counted)")
	o.ops.register(cmd.Flags())
	o.listen.register(cmd.Flags())
	return cmd
}

// exportTracesURL resolves the traces URL: the flag, else the environment
// in the binary's precedence. Errors name the flag or variable, never the
// value.
func exportTracesURL(flag string, getenv func(string) string) (string, error) {
	src, v := "--endpoint", flag
	traces := false
	switch {
	case v != "":
	case getenv(observability.EnvOTLPEndpoint) != "":
		src, v = observability.EnvOTLPEndpoint, getenv(observability.EnvOTLPEndpoint)
	case getenv(observability.EnvOTELTracesEndpoint) != "":
		src, v, traces = observability.EnvOTELTracesEndpoint, getenv(observability.EnvOTELTracesEndpoint), true
	case getenv(observability.EnvOTELEndpoint) != "":
		src, v = observability.EnvOTELEndpoint, getenv(observability.EnvOTELEndpoint)
	default:
		return "", &cliError{Code: codeMissingRequired, Reason: "--endpoint", Detail: "the OTLP/HTTP base URL of the backend, or set $" + observability.EnvOTELEndpoint}
	}
	if err := otlpexport.ValidateTracesURL(v); err != nil {
		return "", &cliError{Code: codeInvalidExportEndpoint, Reason: src, Detail: err.(*otlpexport.ConfigError).Reason}
	}
	if traces {
		return v, nil
	}
	return otlpexport.TracesURL(v), nil
}

// exportCollectors are the exporter's Prometheus counters.
func exportCollectors(e *otlpexport.Exporter) []prometheus.Collector {
	counter := func(name, help string, f func(otlpexport.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f(e.Stats())) })
	}
	cs := []prometheus.Collector{
		counter("adk_export_spans_total", "Spans the OTLP backend accepted.", func(s otlpexport.Stats) uint64 { return s.Spans }),
		counter("adk_export_skipped_records_total", "Stream records that are not completed spans.", func(s otlpexport.Stats) uint64 { return s.Skipped }),
		counter("adk_export_requests_total", "Export requests (first attempts).", func(s otlpexport.Stats) uint64 { return s.Requests }),
		counter("adk_export_retries_total", "Export attempts after a transient failure.", func(s otlpexport.Stats) uint64 { return s.Retries }),
		counter("adk_export_redelivered_messages_total", "Stream messages JetStream delivered again.", func(s otlpexport.Stats) uint64 { return s.Redelivered }),
	}
	for _, r := range otlpexport.DropReasons {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "adk_export_dropped_spans_total", Help: "Spans not delivered, by reason.", ConstLabels: prometheus.Labels{"reason": r},
		}, func() float64 { return float64(e.Stats().Dropped[r]) }))
	}
	return cs
}
