#!/usr/bin/env bash
# Runs every fuzz target in the module for FUZZTIME each (a smoke, not a campaign).
# The checked-in seed corpora under testdata/fuzz/ always run as part of `make test`.
set -euo pipefail
fuzztime=${FUZZTIME:-5s}
status=0
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  grep -lq '^func Fuzz' "$dir"/*_test.go 2>/dev/null || continue
  for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    echo "fuzz $pkg $target ($fuzztime)"
    if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"; then
      status=1
    fi
  done
done
exit $status
