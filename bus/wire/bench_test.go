package wire_test

import (
	"testing"
	"time"

	"github.com/fadcedab/adk/bus/wire"
)

// benchRecord is a ~20-field record shaped like a sample result.
type benchRecord struct {
	JobID      string            `msgpack:"job_id"`
	TaskID     string            `msgpack:"task_id"`
	CaseID     string            `msgpack:"case_id"`
	Sample     int               `msgpack:"sample"`
	WorkerID   string            `msgpack:"worker_id"`
	Status     string            `msgpack:"status"`
	Attempt    int               `msgpack:"attempt"`
	StartedAt  time.Time         `msgpack:"started_at"`
	EndedAt    time.Time         `msgpack:"ended_at"`
	DurationMs int64             `msgpack:"duration_ms"`
	Score      float64           `msgpack:"score"`
	Passed     bool              `msgpack:"passed"`
	Metric     string            `msgpack:"metric"`
	Threshold  float64           `msgpack:"threshold"`
	InTokens   int64             `msgpack:"in_tokens"`
	OutTokens  int64             `msgpack:"out_tokens"`
	Model      string            `msgpack:"model"`
	ErrorCode  string            `msgpack:"error_code"`
	Labels     map[string]string `msgpack:"labels"`
	Turns      []int             `msgpack:"turns"`
}

func BenchmarkCodec(b *testing.B) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	in := benchRecord{
		JobID: "job-01JH8Z", TaskID: "task-01JH8Z-0001", CaseID: "case-greeting",
		Sample: 3, WorkerID: "worker-2", Status: "completed", Attempt: 1,
		StartedAt: now, EndedAt: now.Add(1500 * time.Millisecond), DurationMs: 1500,
		Score: 0.875, Passed: true, Metric: "response_match", Threshold: 0.8,
		InTokens: 1200, OutTokens: 340, Model: "scripted", Labels: map[string]string{"env": "ci"},
		Turns: []int{1, 2, 3},
	}
	b.ReportAllocs()
	var size int
	for b.Loop() {
		data, err := wire.Encode("sample_result", in)
		if err != nil {
			b.Fatal(err)
		}
		size = len(data)
		var out benchRecord
		if err := wire.Decode(data, wire.DecodeLimits{}, "sample_result", &out); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(size), "bytes/msg")
}
