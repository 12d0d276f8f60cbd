package charttest

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const chartDir = "../adk"

// argsFile holds every rendered container's command line (default
// values), one per line; cmd/adk parses each with the binary's flags.
const argsFile = "testdata/args.txt"

// argsSwitchesFile is the same for TestRender_Switches' values.
const argsSwitchesFile = "testdata/args-switches.txt"

// manifests is one rendering, by kind and name.
type manifests struct {
	statefulSets map[string]*appsv1.StatefulSet
	deployments  map[string]*appsv1.Deployment
	services     map[string]*corev1.Service
	configMaps   map[string]*corev1.ConfigMap
	kinds        map[string]int
	raw          string
}

// render renders the chart as `helm template adk deploy/helm/adk -n evals
// --set ...` does after its dependency check, with vals over values.yaml.
func render(t *testing.T, vals map[string]any) manifests {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := chartutil.ProcessDependenciesWithMerge(ch, vals); err != nil {
		t.Fatal(err)
	}
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: "adk", Namespace: "evals", IsInstall: true, Revision: 1}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	out, err := engine.Render(ch, rv)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	m := manifests{statefulSets: map[string]*appsv1.StatefulSet{}, deployments: map[string]*appsv1.Deployment{},
		services: map[string]*corev1.Service{}, configMaps: map[string]*corev1.ConfigMap{}, kinds: map[string]int{}}
	names := make([]string, 0, len(out))
	for name := range out {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		m.raw += out[name]
		for _, doc := range strings.Split(out[name], "\n---") {
			var head struct{ Kind string }
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				t.Fatalf("%s: %v\n%s", name, err, doc)
			}
			if head.Kind == "" {
				continue
			}
			m.kinds[head.Kind]++
			var err error
			switch head.Kind {
			case "StatefulSet":
				var o appsv1.StatefulSet
				err = yaml.UnmarshalStrict([]byte(doc), &o)
				m.statefulSets[o.Name] = &o
			case "Deployment":
				var o appsv1.Deployment
				err = yaml.UnmarshalStrict([]byte(doc), &o)
				m.deployments[o.Name] = &o
			case "Service":
				var o corev1.Service
				err = yaml.UnmarshalStrict([]byte(doc), &o)
				m.services[o.Name] = &o
			case "ConfigMap":
				var o corev1.ConfigMap
				err = yaml.UnmarshalStrict([]byte(doc), &o)
				m.configMaps[o.Name] = &o
			default:
				t.Errorf("%s: unexpected kind %s", name, head.Kind)
			}
			if err != nil {
				t.Fatalf("%s: %s: %v", name, head.Kind, err)
			}
		}
	}
	return m
}

// TestLint: `helm lint` finds no error. Offline, its one warning is the
// NATS dependency not fetched into charts/ (only nats.enabled needs it).
func TestLint(t *testing.T) {
	for _, vals := range []map[string]any{nil, {"nats": map[string]any{"enabled": true}}} {
		l := lint.All(chartDir, vals, "evals", false)
		for _, msg := range l.Messages {
			if msg.Severity >= support.ErrorSev {
				t.Errorf("lint %v: %v", vals, msg)
			} else if msg.Severity == support.WarningSev && !strings.Contains(msg.Err.Error(), "missing these dependencies: nats") {
				t.Errorf("lint %v: %v", vals, msg)
			}
		}
	}
}

// containers returns every rendered container with its pod's volumes.
func (m manifests) pods() map[string]corev1.PodSpec {
	pods := map[string]corev1.PodSpec{}
	for n, s := range m.statefulSets {
		pods[n] = s.Spec.Template.Spec
	}
	for n, d := range m.deployments {
		pods[n] = d.Spec.Template.Spec
	}
	return pods
}

func flag(args []string, name string) string {
	i := slices.Index(args, name)
	if i < 0 || i+1 >= len(args) {
		return ""
	}
	return args[i+1]
}

// TestRender checks the default rendering: kinds and replicas, stable
// Raft addresses, persistent volumes, probes, secrets by reference, and
// writes the command lines for cmd/adk to parse.
func TestRender(t *testing.T) {
	m := render(t, nil)
	for kind, want := range map[string]int{"StatefulSet": 2, "Deployment": 3, "Service": 3, "ConfigMap": 1} {
		if m.kinds[kind] != want {
			t.Errorf("%d %s, want %d (%v)", m.kinds[kind], kind, want, m.kinds)
		}
	}
	if m.kinds["Secret"] != 0 || strings.Contains(m.raw, "kind: Secret") {
		t.Error("the chart renders a Secret: secrets must come from existing Secrets")
	}

	coord := m.statefulSets["adk-coordinator"]
	if coord == nil {
		t.Fatalf("no coordinator StatefulSet: %v", m.statefulSets)
	}
	if *coord.Spec.Replicas != 3 || coord.Spec.PodManagementPolicy != appsv1.ParallelPodManagement || coord.Spec.ServiceName != "adk-coordinator" {
		t.Errorf("coordinators: replicas %d policy %s service %s", *coord.Spec.Replicas, coord.Spec.PodManagementPolicy, coord.Spec.ServiceName)
	}
	if svc := m.services["adk-coordinator"]; svc == nil || svc.Spec.ClusterIP != "None" || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("the coordinators' Service is not headless with publishNotReadyAddresses: %+v", svc)
	}
	if len(coord.Spec.VolumeClaimTemplates) != 1 || coord.Spec.VolumeClaimTemplates[0].Name != "data" {
		t.Errorf("coordinators have no data PVC")
	}
	cargs := coord.Spec.Template.Spec.Containers[0].Args
	wantPeers := "adk-coordinator-0=adk-coordinator-0.adk-coordinator.evals.svc.cluster.local:7100," +
		"adk-coordinator-1=adk-coordinator-1.adk-coordinator.evals.svc.cluster.local:7100," +
		"adk-coordinator-2=adk-coordinator-2.adk-coordinator.evals.svc.cluster.local:7100"
	if got := flag(cargs, "--peers"); got != wantPeers {
		t.Errorf("--peers %q, want %q", got, wantPeers)
	}
	if flag(cargs, "--id") != "$(POD_NAME)" || flag(cargs, "--workers") != "w1,w2" || flag(cargs, "--nats") != "nats://nats:4222" {
		t.Errorf("coordinator args %q", cargs)
	}

	for _, id := range []string{"w1", "w2"} {
		d := m.deployments["adk-worker-"+id]
		if d == nil {
			t.Fatalf("no worker Deployment for %s", id)
		}
		if *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
			t.Errorf("worker %s: replicas %d strategy %s, want 1 Recreate", id, *d.Spec.Replicas, d.Spec.Strategy.Type)
		}
		a := d.Spec.Template.Spec.Containers[0].Args
		if flag(a, "--id") != id || flag(a, "--agent") != "travel=/etc/adk/agents/travel.json" {
			t.Errorf("worker %s args %q", id, a)
		}
	}
	agents := m.configMaps["adk-agents"]
	example, err := os.ReadFile("../../../examples/travel/AGENT.json")
	if err != nil {
		t.Fatal(err)
	}
	if agents == nil || strings.TrimSpace(agents.Data["travel.json"]) != strings.TrimSpace(string(example)) {
		t.Error("the bundled agent (files/agents/travel.json) is not examples/travel/AGENT.json")
	}

	store := m.statefulSets["adk-store"]
	if store == nil || *store.Spec.Replicas != 1 || len(store.Spec.VolumeClaimTemplates) != 1 {
		t.Fatalf("store StatefulSet %+v", store)
	}
	if api := m.deployments["adk-api"]; api == nil || m.services["adk-api"] == nil {
		t.Error("no gateway Deployment and Service")
	}

	for name, pod := range m.pods() {
		if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
			t.Errorf("%s: not runAsNonRoot", name)
		}
		secrets := map[string]string{}
		for _, v := range pod.Volumes {
			if v.Secret != nil {
				secrets[v.Name] = v.Secret.SecretName
			}
		}
		for _, c := range pod.Containers {
			for _, p := range []struct {
				probe *corev1.Probe
				path  string
			}{{c.LivenessProbe, "/healthz"}, {c.ReadinessProbe, "/readyz"}} {
				if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != "metrics" {
					t.Errorf("%s: no %s probe on the metrics port", name, p.path)
				}
			}
			if flag(c.Args, "--metrics-addr") != "0.0.0.0:9090" || len(c.Ports) == 0 || c.Ports[0].ContainerPort != 9090 {
				t.Errorf("%s: --metrics-addr %q ports %v", name, flag(c.Args, "--metrics-addr"), c.Ports)
			}
			if tok := flag(c.Args, "--tokens"); tok != "" {
				mounted := false
				for _, vm := range c.VolumeMounts {
					if strings.HasPrefix(tok, vm.MountPath+"/") && secrets[vm.Name] == "adk-tokens" {
						mounted = true
					}
				}
				if !mounted {
					t.Errorf("%s: --tokens %s is not the adk-tokens Secret", name, tok)
				}
			}
			for _, e := range c.Env {
				if e.Value != "" && (strings.Contains(e.Name, "KEY") || strings.Contains(e.Name, "HEADERS") || strings.Contains(e.Name, "TOKEN")) {
					t.Errorf("%s: %s is inlined", name, e.Name)
				}
			}
		}
	}
	checkArgs(t, m, argsFile)
}

// checkArgs compares every container's command line with file (rewritten
// with UPDATE_ARGS=1), which cmd/adk's TestDeployHelmArgs parses.
func checkArgs(t *testing.T, m manifests, file string) {
	t.Helper()
	var lines []string
	for _, pod := range m.pods() {
		for _, c := range pod.Containers {
			lines = append(lines, strings.Join(c.Args, " "))
		}
	}
	sort.Strings(lines)
	want := strings.Join(lines, "\n") + "\n"
	if os.Getenv("UPDATE_ARGS") == "1" {
		if err := os.WriteFile(file, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(file)
	if err != nil || string(got) != want {
		t.Errorf("%s is stale (rerun with UPDATE_ARGS=1, then cmd/adk's TestDeployHelmArgs):\n%s", file, want)
	}
}

// TestRender_Switches: the values switches render what they promise —
// the bundled NATS, provider keys and OTLP headers from Secrets, the OTLP
// bridge, NATS credentials, a settings file, five coordinators.
func TestRender_Switches(t *testing.T) {
	m := render(t, map[string]any{
		"nats":         map[string]any{"enabled": true},
		"providerKeys": map[string]any{"existingSecret": "llm-keys"},
		"otlp": map[string]any{"endpoint": "http://otel-collector:4318", "serviceName": "evals",
			"headersSecret": "otlp-auth"},
		"externalNATS": map[string]any{"credsSecret": "nats-creds"},
		"settings":     map[string]any{"coordinator": map[string]any{"max_running_jobs": 2}},
		"coordinator":  map[string]any{"replicas": 5},
		"worker":       map[string]any{"ids": []any{"gpu-1"}, "agents": map[string]any{"support": map[string]any{"name": "support"}}},
	})
	coord := m.statefulSets["adk-coordinator"]
	cargs := coord.Spec.Template.Spec.Containers[0].Args
	if *coord.Spec.Replicas != 5 || strings.Count(flag(cargs, "--peers"), "=") != 5 || flag(cargs, "--workers") != "gpu-1" {
		t.Errorf("coordinators: replicas %d args %q", *coord.Spec.Replicas, cargs)
	}
	if flag(cargs, "--nats") != "nats://adk-nats:4222" || flag(cargs, "--nats-creds") != "/etc/adk/nats/creds" || flag(cargs, "--config") != "/etc/adk/settings/adk.json" {
		t.Errorf("coordinator args %q", cargs)
	}
	if m.configMaps["adk-settings"] == nil || !strings.Contains(m.configMaps["adk-settings"].Data["adk.json"], `"max_running_jobs": 2`) {
		t.Errorf("settings ConfigMap %+v", m.configMaps["adk-settings"])
	}
	if off := render(t, map[string]any{"api": map[string]any{"enabled": false}}); off.deployments["adk-api"] != nil || off.services["adk-api"] != nil {
		t.Error("api.enabled=false still renders the gateway")
	}
	checkArgs(t, m, argsSwitchesFile)
	w := m.deployments["adk-worker-gpu-1"]
	if w == nil {
		t.Fatalf("deployments %v", m.deployments)
	}
	c := w.Spec.Template.Spec.Containers[0]
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef == nil || c.EnvFrom[0].SecretRef.Name != "llm-keys" {
		t.Errorf("provider keys envFrom %+v", c.EnvFrom)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if env["OTEL_EXPORTER_OTLP_ENDPOINT"].Value != "http://otel-collector:4318" || env["OTEL_SERVICE_NAME"].Value != "evals" {
		t.Errorf("OTLP env %+v", c.Env)
	}
	if h := env["OTEL_EXPORTER_OTLP_HEADERS"]; h.Value != "" || h.ValueFrom == nil || h.ValueFrom.SecretKeyRef == nil || h.ValueFrom.SecretKeyRef.Name != "otlp-auth" {
		t.Errorf("OTLP headers not from the Secret: %+v", h)
	}
	agents := strings.Join(c.Args, " ")
	if !strings.Contains(agents, "--agent support=/etc/adk/agents/support.json --agent travel=") || !strings.Contains(m.configMaps["adk-agents"].Data["support.json"], `"name":"support"`) {
		t.Errorf("worker agents: args %q", c.Args)
	}
}

// TestRender_Refuses: values the fleet cannot run with fail the rendering
// with a message naming the key.
func TestRender_Refuses(t *testing.T) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		vals map[string]any
		want string
	}{
		{map[string]any{"coordinator": map[string]any{"replicas": 2}}, "coordinator.replicas must be 1, 3 or 5"},
		{map[string]any{"worker": map[string]any{"ids": []any{"w.1"}}}, `worker.ids: "w.1" must be`},
		{map[string]any{"externalNATS": map[string]any{"url": ""}}, "externalNATS.url is required"},
		{map[string]any{"tokens": map[string]any{"existingSecret": ""}}, "tokens.existingSecret"},
	} {
		rv, err := chartutil.ToRenderValues(ch, tc.vals, chartutil.ReleaseOptions{Name: "adk", Namespace: "evals"}, chartutil.DefaultCapabilities)
		if err != nil {
			t.Fatal(err)
		}
		_, err = engine.Render(ch, rv)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want %q", tc.vals, err, tc.want)
		}
	}
}

func TestMain(m *testing.M) {
	// The chart reads files relative to this directory.
	if _, err := os.Stat(filepath.Join(chartDir, "Chart.yaml")); err != nil {
		panic(err)
	}
	goleak.VerifyTestMain(m)
}
