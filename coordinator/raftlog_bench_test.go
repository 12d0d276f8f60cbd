package coordinator

import (
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
)

type nopFSM struct{}

func (nopFSM) Apply(*raft.Log) any                 { return nil }
func (nopFSM) Snapshot() (raft.FSMSnapshot, error) { return nopSnap{}, nil }
func (nopFSM) Restore(r io.ReadCloser) error       { return r.Close() }

type nopSnap struct{}

func (nopSnap) Persist(s raft.SnapshotSink) error { return s.Close() }
func (nopSnap) Release()                          {}

type logStore interface {
	raft.LogStore
	raft.StableStore
	Close() error
}

type inmemStore struct{ *raft.InmemStore }

func (inmemStore) Close() error { return nil }

// BenchmarkRaftApply measures a one-voter Raft group's apply throughput
// (256 commands of 512 bytes in flight, the node's Raft settings) on the
// node's log store (raft-wal) and on raft's in-memory store as the
// ceiling: ns/op is per applied command. The raft-boltdb figures it
// replaced are in bench/RESULTS.md.
func BenchmarkRaftApply(b *testing.B) {
	for _, s := range []struct {
		name string
		open func(dir string) (logStore, error)
	}{
		// inmem is the ceiling: no disk at all.
		{"inmem", func(string) (logStore, error) { return inmemStore{raft.NewInmemStore()}, nil }},
		{"wal", func(dir string) (logStore, error) { return wal.Open(dir) }},
	} {
		b.Run(s.name, func(b *testing.B) {
			dir := b.TempDir()
			st, err := s.open(dir)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			rc := raft.DefaultConfig()
			rc.LocalID = "n1"
			rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = 50*time.Millisecond, 50*time.Millisecond, 50*time.Millisecond
			rc.CommitTimeout = 5 * time.Millisecond
			rc.BatchApplyCh = true
			rc.MaxAppendEntries = 1024
			rc.SnapshotThreshold = 1 << 30
			rc.Logger = hclog.NewNullLogger()
			logs, _ := raft.NewLogCache(512, st)
			snaps := raft.NewInmemSnapshotStore()
			_, trans := raft.NewInmemTransport("n1")
			if err := raft.BootstrapCluster(rc, logs, st, snaps, trans, raft.Configuration{Servers: []raft.Server{{ID: "n1", Address: trans.LocalAddr()}}}); err != nil {
				b.Fatal(err)
			}
			r, err := raft.NewRaft(rc, nopFSM{}, logs, st, snaps, trans)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = r.Shutdown().Error() }()
			deadline := time.Now().Add(10 * time.Second)
			for r.State() != raft.Leader {
				if time.Now().After(deadline) {
					b.Fatalf("no leader: %v %v", r.State(), r.Stats())
				}
				time.Sleep(time.Millisecond) // polling for leadership with a deadline
			}
			cmd := make([]byte, 512)
			sem := make(chan struct{}, 256)
			var wg sync.WaitGroup
			var mu sync.Mutex
			var firstErr error
			b.SetBytes(int64(len(cmd)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				sem <- struct{}{}
				f := r.Apply(cmd, 0)
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := f.Error(); err != nil {
						mu.Lock()
						firstErr = fmt.Errorf("apply: %w", err)
						mu.Unlock()
					}
					<-sem
				}()
			}
			wg.Wait()
			b.StopTimer()
			if firstErr != nil {
				b.Fatal(firstErr)
			}
		})
	}
}
