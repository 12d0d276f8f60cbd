// Package bench holds the benchmark tooling behind `make bench-eval`:
// openaifake, a local OpenAI-compatible server that answers after a fixed
// delay, and evalbench, the driver that generates inputs, runs the built
// adk binary against them and prints the figures issue 5 asks for; and
// fleetbench, which runs coordinator and worker processes against
// openaifake for issue 8's fleet-scaling and leader-RSS figures.
//
// Nothing here is imported by the product; it must not be imported by any
// package outside bench/.
package bench
