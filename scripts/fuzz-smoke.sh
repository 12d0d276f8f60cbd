#!/usr/bin/env bash
# Runs every fuzz target in the module for FUZZTIME each (a smoke, not a campaign).
# The checked-in seed corpora under testdata/fuzz/ always run as part of `make test`.
# A package's targets share one instrumented test binary, run as go test
# -fuzz runs it: in the package's directory, with the package's fuzz cache
# under GOCACHE. go test -fuzz would link the binary again for each target,
# and go test -list build another one to find them.
#
# What is instrumented: the module's own packages (their coverage guides
# the fuzzer), not the standard library or the dependencies. go test -c
# -fuzz instruments every package the test binary links (-d=libfuzzer),
# a third compile of the module and all its dependencies (476 s of CPU from
# an empty cache, 2026-12-06); the targets fuzz our decoders and parsers,
# whose branches are in the module. Built as below, CGO_ENABLED=0 and
# -d=libfuzzer for the module's packages only, every other package is the
# compile make build and make lint already made (bench/RESULTS.md, session
# 17, h23t). The fuzzing engine is the same: -test.fuzz with coverage
# guidance from the instrumented packages.
#
# FUZZ_BIN_DIR keeps the test binaries there (default: a temporary directory
# removed at the end); FUZZ_BUILD_ONLY=1 only builds them. CI builds them
# early, in its background lane, and runs the targets last. go test -c -o
# of a binary that is up to date leaves it as it is, so the run's own build
# is then a check, not a link.
set -euo pipefail
fuzztime=${FUZZTIME:-5s}
fuzzcache="$(go env GOCACHE)/fuzz"
if [ -n "${FUZZ_BIN_DIR:-}" ]; then
  bin=$FUZZ_BIN_DIR
  mkdir -p "$bin"
else
  bin=$(mktemp -d)
  trap 'rm -rf "$bin"' EXIT
fi
module=$(go list -m)
status=0
while read -r pkg dir files; do
  [ -n "$files" ] || continue
  # The names go test -list '^Fuzz' gives: func FuzzXxx in the package's
  # test files (build constraints applied by go list).
  targets=$(cd "$dir" && grep -ho '^func Fuzz\([A-Z0-9_][A-Za-z0-9_]*\)\?(' $files | sed 's/^func //; s/($//' || true)
  [ -n "$targets" ] || continue
  test="$bin/$(echo "$pkg" | tr / _).test"
  CGO_ENABLED=0 go test -c -gcflags="$module/...=-d=libfuzzer" -o "$test" "$pkg"
  [ "${FUZZ_BUILD_ONLY:-}" = 1 ] && { echo "fuzz $pkg: built"; continue; }
  for target in $targets; do
    echo "fuzz $pkg $target ($fuzztime)"
    # Go 1.26's fuzz coordinator can report a bare "context deadline
    # exceeded" when -fuzztime expires mid-input (golang/go#75804, fixed in
    # Go 1.27): no failing input is written. Such a run is retried, up to
    # twice (a CI run of some 40 targets met it twice in one run, once
    # each); a real finding always writes one and fails at once.
    for attempt in 1 2 3; do
      if out=$(cd "$dir" && "$test" -test.paniconexit0 -test.timeout 10m -test.run '^$' -test.fuzz "^${target}\$" \
        -test.fuzztime "$fuzztime" -test.fuzzcachedir "$fuzzcache/$pkg" 2>&1); then
        echo "$out" | tail -n 2
        break
      fi
      echo "$out"
      if [ "$attempt" -lt 3 ] && echo "$out" | grep -q 'context deadline exceeded' && ! echo "$out" | grep -q 'Failing input written'; then
        echo "fuzz $pkg $target: fuzztime deadline race (golang/go#75804), retry $attempt of 2"
        continue
      fi
      status=1
      break
    done
  done
done < <(go list -f '{{.ImportPath}} {{.Dir}} {{join .TestGoFiles " "}} {{join .XTestGoFiles " "}}' ./...)
exit $status
