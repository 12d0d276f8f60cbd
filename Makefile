# adk — run `make help` for the targets.

GO        ?= go
PKGS      ?= ./...
BIN       := bin/adk
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# The commit (with -dirty for uncommitted changes) and the nearest tag are
# stamped too: -trimpath, GOFLAGS=-buildvcs=false and builds without .git
# (the container image) drop Go's own vcs stamp.
COMMIT    ?= $(shell c=$$(git rev-parse HEAD 2>/dev/null) && { git diff --quiet HEAD 2>/dev/null && echo $$c || echo $$c-dirty; } || echo unknown)
TAG       ?= $(shell git describe --tags --abbrev=0 2>/dev/null)
LDFLAGS   := -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.tag=$(TAG)
# podman and buildah default to OCI images, which drop HEALTHCHECK: --format docker keeps it.
CONTAINER_BUILD ?= $(shell command -v podman >/dev/null 2>&1 && echo podman build --format docker || { command -v docker >/dev/null 2>&1 && echo docker build || echo buildah bud --format docker; })
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME  ?= 5s

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@awk 'BEGIN{FS=":.*## "} /^[a-zA-Z0-9_-]+:.*## /{printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# build is static (CGO_ENABLED=0), as make release and the image are: the
# binary then has no dynamic loader or libc to map and relocate at each
# start: a local `adk eval run` reached its first model call 11-19 ms
# sooner and used 4-8 ms less CPU (medians; bench/RESULTS.md, session 16,
# h22p). Only net (the
# pure-Go resolver) and os/user (/etc/passwd and /etc/group, no NSS) had
# cgo paths. lint (go vet, staticcheck) and the tests' non-race binaries
# (testutil.Binary) build with CGO_ENABLED=0 too, so that one compile of
# the module and its dependencies serves them all: a cold cache compiles
# three configurations (static, race, fuzz-instrumented), as before.
.PHONY: build
build: ## Build the static bin/adk (CGO_ENABLED=0)
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/adk

RELEASE_PLATFORMS ?= linux/amd64 linux/arm64
DIST              ?= dist

.PHONY: release
release: ## Static (CGO_ENABLED=0) release binaries dist/adk-VERSION-OS-ARCH for linux/amd64 and linux/arm64; VERSION from git tags
	@mkdir -p $(DIST)
	@for p in $(RELEASE_PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; out=$(DIST)/adk-$(VERSION)-$$os-$$arch; \
	  echo "build $$out"; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags '$(LDFLAGS) -s -w' -o $$out ./cmd/adk || exit 1; \
	done

# A race-built process that exits 0 sleeps GORACE's atexit_sleep_ms (1 s by
# default) first, so that goroutines still running can report races. Test
# binaries end with no goroutine left (goleak), and the adk processes the
# tests start are paid that second on each of hundreds of exits; a report
# already under way is still awaited. A GORACE of the caller's comes after,
# so it wins.
RACE_ENV  := GORACE='atexit_sleep_ms=0 $(GORACE)'
# The packages of PKGS whose test files hold a TestCluster function: the
# cluster phase links and starts only their test binaries.
CLUSTER_PKGS = $(shell $(GO) list -f '{{.ImportPath}}{{range .TestGoFiles}} {{$$.Dir}}/{{.}}{{end}}{{range .XTestGoFiles}} {{$$.Dir}}/{{.}}{{end}}' $(PKGS) | \
  while read -r pkg files; do [ -n "$$files" ] && grep -qs '^func TestCluster' $$files && echo $$pkg; done)

# What CI's phases cost (.ci/run runs them in two lanes; 2 cores; warm =
# build cache of an earlier run, quiet machine, main 42d8a34, ci15a.log;
# cold = empty GOCACHE, CPU = user+sys; 2026-12-06 session 15, h21t):
#   lint        warm 51 s of CPU; cold: go vet 357 s of CPU (it compiles
#               the module and every dependency for their export data;
#               make build then reuses that), staticcheck 177 s more (its
#               own build and analysis).
#   build       warm 8.5 s of CPU (a link); cold: the same, after vet
#               (both static, CGO_ENABLED=0, since session 16: one
#               compile; a configuration of its own would cost ~250 s of
#               CPU cold, as a full compile of cmd/adk with another
#               GOEXPERIMENT took 246 s here).
#   fuzz-smoke  30 targets x 3 s = ~105 s of running. The build
#               instruments the module's own packages only (-d=libfuzzer,
#               CGO_ENABLED=0; scripts/fuzz-smoke.sh says why): the
#               dependencies and the standard library are lint's static
#               compile, so cold, after lint, it costs 184 s of CPU (the
#               module's packages and 15 links) where go test -c -fuzz,
#               a third compile of everything the targets link, cost 476
#               s (session 17, h23t); 13 s when up to date (go test -c
#               -o then leaves it alone).
#   test-chart  warm 4 s of CPU; cold 186 s (compiling Helm and Kubernetes;
#               with CGO_ENABLED=0, sharing lint's standard library, 203 s
#               at load 7-20 in session 17: no gain shown, not adopted).
#   test        cold race compile 394 s of CPU (the test binaries
#               alone: 57 s to link them all warm); unit phase ~205 s, bounded by cmd/adk (~190 s, ~250 s of
#               CPU: it runs the race-built adk hundreds of times); the
#               cluster phase ~650 s one package at a time (session 16,
#               quiet: fleetbench 6 s, cmd/adk 195 s with the 2 cores ~30%
#               busy, devapi 178 s at ~59% (CompareOfAnySize), testcluster
#               278 s at ~19%), so testcluster runs in a lane beside the
#               others (test-cluster, below). Each go test run relinks its test
#               binaries (~3-5 s of CPU each); binaries the tests build
#               (testutil.Binary) are linked once per run.
.PHONY: test
test: ## Run every test with the race detector (then the cluster tests: make test-cluster)
	$(RACE_ENV) $(GO) test -race -count=1 -timeout 15m -skip '^TestCluster' $(PKGS)
	@$(MAKE) --no-print-directory test-cluster

# The cluster phase runs in lanes: each package of CLUSTER_SIDE (import
# paths; testcluster) in a lane of its own beside one lane of the others,
# each lane one package at a time and each package's tests one at a time,
# as before. testcluster's cluster tests are mostly waits (elections,
# leases, grace periods, chaos schedules: ~280 s with the 2 cores ~19%
# busy), so they take what the others leave idle; quiet, they overlap
# fleetbench's and cmd/adk's (~30% busy) and devapi's first tests, and
# the phase takes ~380 s instead of ~650 s. Under heavy load (10-17)
# testcluster's fault tests fail in either layout (see bench/RESULTS.md,
# session 16 h22t). CLUSTER_SIDE= (empty) runs the phase in one lane. A
# side lane's output is printed when every lane is done; any lane failing
# fails the phase.
CLUSTER_SIDE ?= github.com/fadcedab/adk/testcluster
CLUSTER_TEST  = $(RACE_ENV) $(GO) test -race -count=1 -timeout 15m -p 1 -run '^TestCluster'

.PHONY: test-cluster
test-cluster: ## Only make test's cluster tests (TestCluster*, race); CLUSTER_SIDE's packages each in a lane beside the others
	@main= logs= pids= st=0; dir=$$(mktemp -d); \
	  for p in $(CLUSTER_PKGS); do case " $(CLUSTER_SIDE) " in \
	    *" $$p "*) echo "$(CLUSTER_TEST) $$p  (beside)"; $(CLUSTER_TEST) $$p >"$$dir/$${p##*/}.log" 2>&1 & \
	               pids="$$pids $$!"; logs="$$logs $$dir/$${p##*/}.log";; \
	    *) main="$$main $$p";; esac; done; \
	  if [ -n "$$main" ]; then echo "$(CLUSTER_TEST)$$main"; $(CLUSTER_TEST) $$main || st=1; fi; \
	  for p in $$pids; do wait $$p || st=1; done; \
	  for l in $$logs; do cat "$$l"; done; rm -rf "$$dir"; exit $$st

.PHONY: test-chart
test-chart: ## Lint and render the Helm chart (deploy/helm/charttest, its own module: Helm and Kubernetes stay out of adk's)
	cd deploy/helm/charttest && $(GO) test -count=1 ./...

.PHONY: lint
lint: ## gofmt check, go vet, staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go') 2>&1); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	CGO_ENABLED=0 $(GO) vet $(PKGS)
	CGO_ENABLED=0 $(GO) run $(STATICCHECK) $(PKGS)

.PHONY: fuzz-smoke
fuzz-smoke: ## Run each fuzz target for FUZZTIME (default 5s); FUZZ_BIN_DIR keeps the instrumented test binaries, FUZZ_BUILD_ONLY=1 only builds them
	FUZZTIME=$(FUZZTIME) ./scripts/fuzz-smoke.sh

.PHONY: bench
bench: bench-eval bench-fleet bench-fleet-100k bench-ratelimit bench-otlp ## Run the benchmarks and print the figures the issues ask for
	ADK_BENCH_LARGE=1 ADK_BENCH_RATE=50000 $(GO) test -run '^$$' -bench . -benchmem -count=1 -timeout 20m $(PKGS)

.PHONY: bench-eval
bench-eval: build ## adk eval run through the binary: 10k scripted samples; 1k/5k samples vs a 200 ms OpenAI fake at concurrency 64/256; --cache cold and cached; 100k cases --format jsonl (peak RSS); adk eval compare of two 100k-case jsonl results (peak RSS)
	$(GO) build -o bin/openaifake ./bench/openaifake
	$(GO) run ./bench/evalbench -adk $(BIN) -openaifake bin/openaifake

.PHONY: bench-compare-100k
bench-compare-100k: build ## adk eval compare of a 100,000-case jsonl result with itself, json past one 16 MiB document and markdown (wall, CPU, peak RSS); BASE=OLD_BIN adds an A/B
	$(GO) run ./bench/evalbench -adk $(BIN) -scripted-only -only 'compare-100k' $(if $(BASE),-baseline $(BASE) -runs 3)

.PHONY: bench-fleet
bench-fleet: build ## Fleet scaling (1, 2, 4 adk worker processes × 64 slots vs a 200 ms OpenAI fake, 3 coordinator processes) and the leader's peak RSS over a 10,000-task job
	$(GO) build -o bin/openaifake ./bench/openaifake
	$(GO) run ./bench/fleetbench -adk $(BIN) -openaifake bin/openaifake

.PHONY: bench-fleet-100k
bench-fleet-100k: build ## A 100,000-task fleet job (4 workers; 1,000 cases x 100, then a 100,000-case set uploaded in parts): it completes, the leader's peak heap/RSS and completion tail, its result read back as the jsonl stream
	$(GO) build -o bin/openaifake ./bench/openaifake
	$(GO) run ./bench/fleetbench -adk $(BIN) -openaifake bin/openaifake -workers 4 -rss-tasks 100000
	$(GO) run ./bench/fleetbench -adk $(BIN) -openaifake bin/openaifake -workers 4 -rss-only -rss-tasks 100000 -rss-cases 100000

.PHONY: bench-ratelimit
bench-ratelimit: build ## Fleet-wide provider rate limit: 4 adk workers sharing rate_limit.requests_per_minute 1200 against a fake answering 429 above 1200/min, all busy, then 2 idle (achieved within 10%, <1% 429s, no failed sample)
	$(GO) build -o bin/openaifake ./bench/openaifake
	$(GO) run ./bench/fleetbench -adk $(BIN) -openaifake bin/openaifake -ratelimit-rpm 1200 -ratelimit-workers 4 -capacity 8 -delay 50ms
	$(GO) run ./bench/fleetbench -adk $(BIN) -openaifake bin/openaifake -ratelimit-rpm 1200 -ratelimit-workers 4 -ratelimit-idle 2 -capacity 8 -delay 50ms

.PHONY: bench-otlp
bench-otlp: build ## OTLP/HTTP ingestion through adk serve driven by telemetrygen (installs the pinned telemetrygen into bin/)
	$(GO) run ./bench/otlpbench -adk $(BIN)

.PHONY: demo
.PHONY: chaos
chaos: ## Seeded random faults (leader, follower, worker, NATS node, worker silence) over an in-process cluster; CHAOS_RUNS (default 20), CHAOS_SEED replays
	CHAOS_RUNS=$${CHAOS_RUNS:-20} $(GO) test -count=1 -timeout $$(( $${CHAOS_RUNS:-20} * 3 + 5 ))m -run 'TestChaosChecker|TestClusterChaos$$' -v ./testcluster/ | grep --line-buffered -E '^(---|ok|FAIL|panic)|chaos|goroutine'

# The chaos targets filter go test's output through grep; pipefail keeps
# go test's exit status (a failing run must fail the target).
chaos chaos-procs: SHELL := /bin/bash
chaos chaos-procs: .SHELLFLAGS := -o pipefail -c

.PHONY: chaos-procs
chaos-procs: ## Seeded kill -9/SIGSTOP faults over real processes (nats-server, 3 coordinators, 4 workers, 2 store nodes, a fake provider); CHAOS_RUNS (default 20), CHAOS_SEED replays, CHAOS_HISTORY_DIR keeps failing runs
	CHAOS_RUNS=$${CHAOS_RUNS:-20} nice -n 19 $(GO) test -count=1 -timeout $$(( $${CHAOS_RUNS:-20} * 4 + 5 ))m -run 'TestChaosChecker|TestClusterChaosProcs' -v ./testcluster/ | grep --line-buffered -E '^(---|ok|FAIL|panic)|chaos|goroutine'

demo: build ## The README's main job: a local eval of the bundled example agent
	./$(BIN) eval run --config examples/travel/AGENT.json --eval-set examples/travel/evalset.json --criteria examples/travel/criteria.json --format markdown

.PHONY: image
image: ## Container image adk:VERSION from the Dockerfile (docker, podman or buildah; CONTAINER_BUILD overrides)
	$(CONTAINER_BUILD) --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) --build-arg TAG=$(TAG) -t adk:$(VERSION) .

.PHONY: clean
clean: ## Remove build output
	rm -rf bin dist
