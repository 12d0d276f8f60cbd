package tracestore

import (
	"errors"
	"testing"
)

func TestBadgerTuning_Resolve(t *testing.T) {
	t.Run("defaults open", func(t *testing.T) {
		for _, small := range []bool{false, true} {
			if _, _, err := badgerOptions(Config{InMemory: true, Small: small}); err != nil {
				t.Fatalf("small=%v: %v", small, err)
			}
		}
	})
	for name, tu := range map[string]BadgerTuning{
		"value threshold above 15% of memtable": {MemTableSize: 4 << 20, ValueThreshold: 1 << 20},
		"one compactor":                         {NumCompactors: 1},
		"stall not above L0 trigger":            {NumLevelZeroTables: 8, NumLevelZeroTablesStall: 8},
		"compression without block cache":       {Compression: "zstd"},
		"unknown compression":                   {Compression: "lz4"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := badgerOptions(Config{InMemory: true, Badger: tu})
			if !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("got %v, want invalid options", err)
			}
		})
	}
	t.Run("override opens", func(t *testing.T) {
		s, err := Open(Config{InMemory: true, Badger: BadgerTuning{Compression: "snappy", BlockCacheSize: 8 << 20, ValueThreshold: 16 << 10}})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	})
}
