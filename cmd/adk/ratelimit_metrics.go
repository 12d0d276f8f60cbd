package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fadcedab/adk/agent/model/ratelimit"
	"github.com/fadcedab/adk/coordinator"
)

// Rate limit series. A process's limiters are labelled by endpoint (the
// provider, its base URL and the model: every agent of the process calling
// it shares one limiter); the fleet's view also by agent, which only
// workers of earlier builds report (theirs were per agent).
var (
	descLimitGranted = prometheus.NewDesc("adk_ratelimit_granted_total",
		"Model calls the rate limiter admitted.", []string{"endpoint"}, nil)
	descLimitWaiting = prometheus.NewDesc("adk_ratelimit_waiting",
		"Model calls waiting for the rate limiter now.", []string{"endpoint"}, nil)
	descLimitWait = prometheus.NewDesc("adk_ratelimit_wait_seconds_total",
		"Time model calls spent waiting for the rate limiter.", []string{"endpoint"}, nil)
	descLimitThrottled = prometheus.NewDesc("adk_ratelimit_throttled_total",
		"Model calls the provider answered 429 (each was retried).", []string{"endpoint"}, nil)
	descLimitRPM = prometheus.NewDesc("adk_ratelimit_requests_per_minute",
		"Requests per minute in force here (a worker's share of the fleet's limit; +Inf: none).", []string{"endpoint"}, nil)
	descFleetFactor = prometheus.NewDesc("adk_ratelimit_fleet_factor",
		"Fraction of the declared limit the fleet runs at (AIMD; this node's view, the leader's decides).", []string{"agent", "endpoint"}, nil)
	descFleetCuts = prometheus.NewDesc("adk_ratelimit_fleet_cuts_total",
		"Times 429s cut the fleet's limit.", []string{"agent", "endpoint"}, nil)
	descFleetWorkers = prometheus.NewDesc("adk_ratelimit_fleet_workers",
		"Workers sharing the limit.", []string{"agent", "endpoint"}, nil)
	descFleetDemand = prometheus.NewDesc("adk_ratelimit_fleet_waiting",
		"Model calls waiting or in flight at the workers sharing the limit, at their last heartbeats (the leader splits the limit by it).", []string{"agent", "endpoint"}, nil)
	descFleetActive = prometheus.NewDesc("adk_ratelimit_fleet_active_workers",
		"Workers sharing the limit that had calls at their last heartbeats (an idle worker's share goes to these).", []string{"agent", "endpoint"}, nil)
)

// limiterCollector exports rate limiters' counters.
type limiterCollector struct {
	stats func() []ratelimit.Stats
}

func (c limiterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLimitGranted, descLimitWaiting, descLimitWait, descLimitThrottled, descLimitRPM} {
		ch <- d
	}
}

func (c limiterCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.stats() {
		lv := []string{s.Endpoint}
		ch <- prometheus.MustNewConstMetric(descLimitGranted, prometheus.CounterValue, float64(s.Admitted), lv...)
		ch <- prometheus.MustNewConstMetric(descLimitWaiting, prometheus.GaugeValue, float64(s.Waiting), lv...)
		ch <- prometheus.MustNewConstMetric(descLimitWait, prometheus.CounterValue, s.WaitSeconds, lv...)
		ch <- prometheus.MustNewConstMetric(descLimitThrottled, prometheus.CounterValue, float64(s.Throttled), lv...)
		ch <- prometheus.MustNewConstMetric(descLimitRPM, prometheus.GaugeValue, s.Limits.RPM, lv...)
	}
}

// fleetLimitCollector exports a coordinator's view of the fleet's limits.
type fleetLimitCollector struct{ n *coordinator.Node }

func (c fleetLimitCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descFleetFactor
	ch <- descFleetCuts
	ch <- descFleetWorkers
	ch <- descFleetDemand
	ch <- descFleetActive
}

func (c fleetLimitCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.n.LimitStates() {
		lv := []string{s.Agent, s.Endpoint}
		ch <- prometheus.MustNewConstMetric(descFleetFactor, prometheus.GaugeValue, s.Factor, lv...)
		ch <- prometheus.MustNewConstMetric(descFleetCuts, prometheus.CounterValue, float64(s.Cuts), lv...)
		ch <- prometheus.MustNewConstMetric(descFleetWorkers, prometheus.GaugeValue, float64(s.Holders), lv...)
		ch <- prometheus.MustNewConstMetric(descFleetDemand, prometheus.GaugeValue, float64(s.Demand), lv...)
		ch <- prometheus.MustNewConstMetric(descFleetActive, prometheus.GaugeValue, float64(s.Active), lv...)
	}
}
