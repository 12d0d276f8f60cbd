package agent

import "github.com/fadcedab/adk/agent/internal/httpx"

// KeepIdleConnections bounds the model providers' cleartext HTTP
// connections to each host, those in a call and the idle ones together,
// at n from now on, closing the idle ones beyond it at once; n < 0 lifts
// the bound. A process that runs one eval passes it how many calls its
// workers still running can make at once (evalengine.RunConfig.
// WorkersRunning times CallsAtOnce): a stopped worker makes no call, so
// the connections beyond that could only wait for the process's exit,
// where the kernel would close them one by one after the report is
// written. Every call that can still come finds a connection the bound
// kept. It bounds only the lean pool (httpx: http:// providers without a
// proxy); https:// and proxied providers' connections are left to the
// process's exit.
func KeepIdleConnections(n int) { httpx.KeepIdle(n) }

// CallsAtOnce is how many model calls one sample of the config's root
// agent can have in flight at once: 1, or, through a parallel workflow,
// the sum of its branches' (nested workflows counted the same way). A
// caller bounding the idle connections by the samples still running
// (KeepIdleConnections) multiplies by it.
func (c *Config) CallsAtOnce() int { return callsAtOnce(&c.Spec) }

func callsAtOnce(s *AgentSpec) int {
	n := 0
	for i := range s.SubAgents {
		k := callsAtOnce(&s.SubAgents[i])
		if s.Type == TypeParallel {
			n += k
		} else {
			n = max(n, k)
		}
	}
	return max(n, 1)
}
