#!/usr/bin/env bash
# Exits 0 when this machine runs linux/386 programs: a kernel built without IA32 emulation
# (some virtual machines' kernels) does not, and then the router's 386 tests can be built, not run.
set -euo pipefail
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
printf 'package main\n\nfunc main() {}\n' >"$dir/main.go"
(cd "$dir" && GOOS=linux GOARCH=386 GOFLAGS= go build -o probe main.go)
"$dir/probe" 2>/dev/null
