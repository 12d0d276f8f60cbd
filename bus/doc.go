// Package bus owns everything NATS: the embedded nats-server, client
// connection options, the JetStream topology (subjects now; streams,
// consumers and KV buckets as later issues add them). The versioned,
// bounded msgpack wire codec every NATS payload uses lives in bus/wire, a
// leaf that does not link nats-server (so its fuzz target builds fast).
//
// Design notes live in DESIGN.md beside this file.
//
// bus must not import coordinator, worker, store, evalengine, agent or
// devapi: they build on it, never the other way round. It may import
// internal and the signal types of observability.
package bus
