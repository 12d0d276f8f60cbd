package bus_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fadcedab/adk/bus"
)

// BenchmarkTaskPathSync is the JetStream side of one dispatched task with
// the server's sync setting (issue 17): the leader publishes the task
// message (with its Nats-Msg-Id) to ADK_TASKS, the worker fetches it and
// double-acks it, publishes the result to ADK_RESULTS, and the leader
// fetches and acks that. "interval" is nats-server's default (file blocks
// fsynced every 2 minutes; a process kill -9 loses nothing written, since
// the OS holds it, only a machine crash can); "always" is `sync_interval:
// always` (fsync on every write). One op is one task, serial (the latency
// a task pays); run with -benchtime to taste:
//
//	go test -run '^$' -bench TaskPathSync -benchtime 2000x ./bus/
func BenchmarkTaskPathSync(b *testing.B) {
	for _, mode := range []struct {
		name   string
		always bool
	}{{"interval", false}, {"always", true}} {
		b.Run(mode.name, func(b *testing.B) {
			o := &server.Options{ServerName: "sync-" + mode.name, JetStream: true, StoreDir: b.TempDir(), DontListen: true,
				NoSigs: true, NoLog: true, SyncAlways: mode.always, JetStreamMaxMemory: 64 << 20, JetStreamMaxStore: 4 << 30}
			s, err := server.NewServer(o)
			if err != nil {
				b.Fatal(err)
			}
			s.Start()
			defer s.Shutdown()
			if !s.ReadyForConnections(10 * time.Second) {
				b.Fatal("server not ready")
			}
			nc, err := nats.Connect("", nats.InProcessServer(s))
			if err != nil {
				b.Fatal(err)
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			if err := bus.EnsureTaskStreams(ctx, js, bus.TaskStreamConfig{Replicas: 1}); err != nil {
				b.Fatal(err)
			}
			if err := bus.EnsureWorkerConsumer(ctx, js, "w1", 1000, 30*time.Second); err != nil {
				b.Fatal(err)
			}
			tasks, err := js.Consumer(ctx, bus.TasksStream, bus.WorkerConsumer("w1"))
			if err != nil {
				b.Fatal(err)
			}
			results, err := js.CreateOrUpdateConsumer(ctx, bus.ResultsStream, jetstream.ConsumerConfig{Durable: bus.ResultsConsumer, AckPolicy: jetstream.AckExplicitPolicy})
			if err != nil {
				b.Fatal(err)
			}
			taskSubj, _ := bus.TaskSubject("w1")
			payload := make([]byte, 512)
			fetchOne := func(c jetstream.Consumer) jetstream.Msg {
				batch, err := c.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
				if err != nil {
					b.Fatal(err)
				}
				for m := range batch.Messages() {
					return m
				}
				b.Fatal("no message")
				return nil
			}
			b.ResetTimer()
			for i := range b.N {
				if _, err := js.Publish(ctx, taskSubj, payload, jetstream.WithMsgID(fmt.Sprintf("t-%d", i))); err != nil {
					b.Fatal(err)
				}
				if err := fetchOne(tasks).DoubleAck(ctx); err != nil {
					b.Fatal(err)
				}
				if _, err := js.Publish(ctx, fmt.Sprintf("%sjob.w1", bus.ResultSubjectPrefix), payload); err != nil {
					b.Fatal(err)
				}
				if err := fetchOne(results).Ack(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
