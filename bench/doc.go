// Package bench holds the benchmark tooling behind `make bench-eval`,
// `make bench-fleet` and `make bench-otlp`: openaifake, a local
// OpenAI-compatible server that answers after a fixed delay; evalbench,
// the driver that generates inputs, runs the built adk binary against them
// and prints the figures issue 5 asks for; fleetbench, which runs
// coordinator and worker processes against openaifake for issue 8's
// fleet-scaling and leader-RSS figures; and otlpbench, which drives
// `adk serve`'s OTLP receiver with telemetrygen for issue 6.
//
// Nothing here is imported by the product; it must not be imported by any
// package outside bench/.
package bench
