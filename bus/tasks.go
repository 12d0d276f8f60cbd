package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Eval-job topology: the ADK_TASKS work-queue stream with one durable,
// filtered pull consumer per allowlisted worker, and the ADK_RESULTS stream
// the coordinator leader consumes. Only coordinators create these; workers
// may only fetch from and ack their own consumer.
const (
	// TasksStream holds dispatched tasks, adk.task.<worker>.
	TasksStream = "ADK_TASKS"
	// ResultsStream holds sample results, adk.result.<job>.
	ResultsStream = "ADK_RESULTS"
	// ResultsConsumer is the coordinators' shared durable on ADK_RESULTS;
	// only the Raft leader pulls from it.
	ResultsConsumer = "coord-results"
	// HeartbeatSubjectPrefix prefixes worker heartbeats: adk.hb.<worker>
	// (core NATS request/reply; the Raft leader answers).
	HeartbeatSubjectPrefix = "adk.hb."
	// AllHeartbeatsSubject matches every worker heartbeat.
	AllHeartbeatsSubject = HeartbeatSubjectPrefix + "*"
	// OwnerSubjectPrefix prefixes job-owner lease renewals: adk.owner.<owner>.
	OwnerSubjectPrefix = "adk.owner."
	// AllOwnersSubject matches every owner renewal.
	AllOwnersSubject = OwnerSubjectPrefix + "*"
	// KillSubjectPrefix prefixes the leader's kill notices to a worker:
	// adk.kill.<worker> (core NATS; only coordinators may publish). A job
	// ending (cancel, owner lost, timeout) stops its tasks at once instead
	// of at the worker's next heartbeat answer.
	KillSubjectPrefix = "adk.kill."
	// TaskDuplicateWindow is the Nats-Msg-Id window of ADK_TASKS.
	TaskDuplicateWindow = 2 * time.Minute
)

// HeartbeatSubject returns adk.hb.<workerID>.
func HeartbeatSubject(workerID string) (string, error) {
	return subject(HeartbeatSubjectPrefix, workerID)
}

// KillSubject returns adk.kill.<workerID>.
func KillSubject(workerID string) (string, error) { return subject(KillSubjectPrefix, workerID) }

// OwnerSubject returns adk.owner.<ownerID>.
func OwnerSubject(ownerID string) (string, error) { return subject(OwnerSubjectPrefix, ownerID) }

// WorkerConsumer names worker id's durable consumer on ADK_TASKS.
func WorkerConsumer(workerID string) string { return "w-" + workerID }

// TaskStreamConfig sizes the eval-job streams.
type TaskStreamConfig struct {
	Replicas   int   // 1 or 3
	MaxMsgs    int64 // per stream (default 1,000,000)
	MaxBytes   int64 // per stream (default 1 GiB)
	MaxMsgSize int32 // default 1 MiB
}

func (c TaskStreamConfig) withDefaults() TaskStreamConfig {
	if c.Replicas <= 0 {
		c.Replicas = 1
	}
	if c.MaxMsgs <= 0 {
		c.MaxMsgs = 1_000_000
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = 1 << 30
	}
	if c.MaxMsgSize <= 0 {
		c.MaxMsgSize = 1 << 20
	}
	return c
}

// EnsureTaskStreams creates or updates ADK_TASKS (work queue, discard new,
// dedup window) and ADK_RESULTS (work queue: the leader's acks remove
// results once applied).
func EnsureTaskStreams(ctx context.Context, js jetstream.JetStream, cfg TaskStreamConfig) error {
	cfg = cfg.withDefaults()
	for _, sc := range []jetstream.StreamConfig{
		{Name: TasksStream, Subjects: []string{AllTasksSubject}},
		{Name: ResultsStream, Subjects: []string{AllResultsSubject}},
	} {
		sc.Retention = jetstream.WorkQueuePolicy
		sc.Discard = jetstream.DiscardNew
		sc.Storage = jetstream.FileStorage
		sc.Replicas = cfg.Replicas
		sc.MaxMsgs, sc.MaxBytes, sc.MaxMsgSize = cfg.MaxMsgs, cfg.MaxBytes, cfg.MaxMsgSize
		sc.Duplicates = TaskDuplicateWindow
		if _, err := js.CreateOrUpdateStream(ctx, sc); err != nil {
			return fmt.Errorf("ensure stream %s: %w", sc.Name, err)
		}
	}
	return nil
}

// EnsureWorkerConsumer creates worker id's durable pull consumer, filtered
// to adk.task.<id>, explicit ack, MaxDeliver 1 (a task is never delivered
// twice), AckWait ackWait. An existing consumer is left as it is: deleting
// and recreating a work-queue consumer would replay stored tasks.
func EnsureWorkerConsumer(ctx context.Context, js jetstream.JetStream, workerID string, maxAckPending int, ackWait time.Duration) error {
	subj, err := TaskSubject(workerID)
	if err != nil {
		return err
	}
	name := WorkerConsumer(workerID)
	if _, err := js.Consumer(ctx, TasksStream, name); err == nil {
		return nil
	} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("consumer %s: %w", name, err)
	}
	_, err = js.CreateConsumer(ctx, TasksStream, jetstream.ConsumerConfig{
		Durable:       name,
		FilterSubject: subj,
		AckPolicy:     jetstream.AckExplicitPolicy,
		MaxDeliver:    1,
		AckWait:       ackWait,
		MaxAckPending: maxAckPending,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil && !errors.Is(err, jetstream.ErrConsumerExists) {
		return fmt.Errorf("create consumer %s: %w", name, err)
	}
	return nil
}

// WorkerPermissions returns the NATS user for an allowlisted worker: it
// may fetch from and ack only its own consumer, publish results,
// its own heartbeats and the coordinator's job_spec request, and receive
// only on its own inbox prefix (connect with nats.CustomInboxPrefix
// WorkerInboxPrefix(id)).
func WorkerPermissions(workerID, password string) User {
	c := WorkerConsumer(workerID)
	return User{
		Name:     workerID,
		Password: password,
		PublishAllow: []string{
			"$JS.API.CONSUMER.INFO." + TasksStream + "." + c,
			"$JS.API.CONSUMER.MSG.NEXT." + TasksStream + "." + c,
			"$JS.ACK." + TasksStream + "." + c + ".>",
			ResultSubjectPrefix + "*." + workerID,
			HeartbeatSubjectPrefix + workerID,
			CoordSubjectPrefix + "job_spec",
			// Task traces, under the principal of each job it runs
			// (worker/signals.go): a worker serves every scope.
			SignalSubjectPrefix + "*",
		},
		SubscribeAllow: []string{WorkerInboxPrefix(workerID) + ".>", KillSubjectPrefix + workerID},
	}
}

// WorkerInboxPrefix is the inbox prefix a worker's connection must use.
func WorkerInboxPrefix(workerID string) string { return "_INBOX_" + workerID }
