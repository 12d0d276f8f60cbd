package plugins

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/fadcedab/adk/agent/model"
)

func TestCompile_DescriptorBounds(t *testing.T) {
	ok := observer(new([]string))
	big := map[string]any{"s": strings.Repeat("x", MaxConfigBytes)}
	edge := map[string]any{"s": strings.Repeat("x", MaxConfigBytes-8)} // {"s":"…"} = 1 MiB exactly
	for _, tc := range []struct {
		name   string
		d      Descriptor
		reason string // "" = valid
	}{
		{"minimal", Descriptor{ID: "a", Plugin: ok}, ""},
		{"empty id", Descriptor{Plugin: ok}, ReasonInvalidID},
		{"id 256 bytes", Descriptor{ID: strings.Repeat("i", 256), Plugin: ok}, ""},
		{"id 257 bytes", Descriptor{ID: strings.Repeat("i", 257), Plugin: ok}, ReasonInvalidID},
		{"id invalid utf-8", Descriptor{ID: "\xff", Plugin: ok}, ReasonInvalidID},
		{"nil plugin", Descriptor{ID: "a"}, ReasonInvalidPlugin},
		{"no callbacks", Descriptor{ID: "a", Plugin: Hooks{}}, ReasonNoCallbacks},
		{"bad mode", Descriptor{ID: "a", Plugin: ok, Mode: "amend"}, ReasonInvalidMode},
		{"bad policy", Descriptor{ID: "a", Plugin: ok, FailurePolicy: "maybe"}, ReasonInvalidFailurePolicy},
		{"timeout 1", Descriptor{ID: "a", Plugin: ok, TimeoutMs: 1}, ""},
		{"timeout -1", Descriptor{ID: "a", Plugin: ok, TimeoutMs: -1}, ReasonInvalidTimeoutMs},
		{"timeout 120000", Descriptor{ID: "a", Plugin: ok, TimeoutMs: 120_000}, ""},
		{"timeout 120001", Descriptor{ID: "a", Plugin: ok, TimeoutMs: 120_001}, ReasonInvalidTimeoutMs},
		{"result bytes 1", Descriptor{ID: "a", Plugin: ok, MaxResultBytes: 1}, ""},
		{"result bytes -1", Descriptor{ID: "a", Plugin: ok, MaxResultBytes: -1}, ReasonInvalidMaxResultSize},
		{"result bytes 1048576", Descriptor{ID: "a", Plugin: ok, MaxResultBytes: 1 << 20}, ""},
		{"result bytes 1048577", Descriptor{ID: "a", Plugin: ok, MaxResultBytes: 1<<20 + 1}, ReasonInvalidMaxResultSize},
		{"config 1 MiB", Descriptor{ID: "a", Plugin: ok, Config: edge}, ""},
		{"config over 1 MiB", Descriptor{ID: "a", Plugin: ok, Config: big}, ReasonInvalidPluginConfig},
		{"config not JSON", Descriptor{ID: "a", Plugin: ok, Config: map[string]any{"f": func() {}}}, ReasonInvalidPluginConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile([]Descriptor{{ID: "first", Plugin: ok}, tc.d})
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("Compile: %v", err)
				}
				_ = p.Close()
				return
			}
			pe := wantCode(t, err, CodeInvalidPluginDescriptor)
			if pe.Index != 1 || !strings.HasPrefix(pe.Reason, tc.reason) {
				t.Fatalf("error = %+v, want index 1 reason %s", pe, tc.reason)
			}
			if !errors.Is(err, ErrInvalidDescriptor) {
				t.Fatal("errors.Is(ErrInvalidDescriptor) = false")
			}
		})
	}
}

func TestCompile_CollectionBounds(t *testing.T) {
	ok := observer(new([]string))
	descs := func(n int) []Descriptor {
		d := make([]Descriptor, n)
		for i := range d {
			d[i] = Descriptor{ID: fmt.Sprint("p", i), Plugin: ok}
		}
		return d
	}
	p, err := Compile(descs(PluginLimit))
	if err != nil {
		t.Fatalf("128 plugins: %v", err)
	}
	_ = p.Close()
	_, err = Compile(descs(PluginLimit + 1))
	if pe := wantCode(t, err, CodePluginLimit); pe.Limit != 128 {
		t.Fatalf("129 plugins: %+v", pe)
	}
	_, err = Compile([]Descriptor{{ID: "a", Plugin: ok}, {ID: "b", Plugin: ok}, {ID: "a", Plugin: ok}})
	if pe := wantCode(t, err, CodeDuplicatePluginID); pe.PluginID != "a" {
		t.Fatalf("duplicate: %+v", pe)
	}
}

func TestCompile_PipelineDefaults(t *testing.T) {
	ok := observer(new([]string))
	p, err := Compile([]Descriptor{{ID: "a", Plugin: ok}, {ID: "b", Plugin: ok, Mode: ModeObserve, TimeoutMs: 7}},
		WithDefaults(Defaults{Mode: ModeIntervene, FailurePolicy: PolicyClosed, TimeoutMs: 50, MaxResultBytes: 99}))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got := p.Describe().Plugins
	want := []PluginDescription{
		{ID: "a", Mode: ModeIntervene, FailurePolicy: PolicyClosed, TimeoutMs: 50, MaxResultBytes: 99},
		{ID: "b", Mode: ModeObserve, FailurePolicy: PolicyClosed, TimeoutMs: 7, MaxResultBytes: 99},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Describe = %+v", got)
	}
	_, err = Compile(nil, WithDefaults(Defaults{TimeoutMs: MaxTimeoutMs + 1}))
	if pe := wantCode(t, err, CodeInvalidPluginDescriptor); pe.Index != -1 {
		t.Fatalf("bad defaults: %+v", pe)
	}
}

func TestPipeline_ContextIsJSONNormalisedAndPruned(t *testing.T) {
	type creds struct {
		User     string `json:"user"`
		Password string `json:"password"`
	}
	var got map[string]any
	p := compile(t, Descriptor{ID: "a", Plugin: Hooks{BeforeModel: func(_ context.Context, cc CallContext, _ *model.Request, _ map[string]any) (Outcome, error) {
		got = cc.Extra
		return Observe(), nil
	}}})
	p.Run(context.Background(), HookBeforeModel, CallContext{Extra: map[string]any{
		"creds": creds{"u", "p"}, "headers": map[string]string{"Cookie": "c", "Accept": "json"},
	}}, request("q"))
	want := map[string]any{"creds": map[string]any{"user": "u"}, "headers": map[string]any{"Accept": "json"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("plugin saw %#v, want %#v", got, want)
	}
}
