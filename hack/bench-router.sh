#!/usr/bin/env bash
# bench-router.sh — make bench-router: measures the router (cmd/router) against a direct chain of
# its steps and KServe's InferenceGraph router with hack/bench-router, and writes
# docs/performance-router.md. It builds the router, the benchmark, KServe's router
# (hack/build-tool.sh kserve; the report says why when it cannot be built, and measures the direct
# chain only) and, when BENCH_ROUTER_BEFORE names a revision, the router of that revision, measured
# beside in the same rounds. KServe's router listens on its fixed port 8080, so the benchmark runs
# in a network namespace of its own (loopback only) when it can make one (root).
#
# Environment: KSERVE_ROUTER and KSERVE_VERSION (where the Makefile caches KServe's router, and
# its version), BENCH_ROUTER_BEFORE (a revision, optional), BENCH_ROUTER_ARGS (more flags of
# hack/bench-router, optional; a later flag wins over an earlier one).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
: "${KSERVE_ROUTER:?names where the KServe router is built}" "${KSERVE_VERSION:?names the version of the KServe router}"

mkdir -p bin
hack/build-tool.sh kserve "$(dirname "$KSERVE_ROUTER")" 2>&1 | tee bin/kserve-build.log || true
go build -o bin/router ./cmd/router
go build -o bin/bench-router ./hack/bench-router

# shellcheck disable=SC2086 # BENCH_ROUTER_ARGS are flags, split on spaces.
set -- -router "$root/bin/router" -out "$root/docs/performance-router.md" ${BENCH_ROUTER_ARGS:-}

# build_before builds the router of revision $1 into bin/router-before, from a worktree removed
# once it is built.
build_before() (
	tmp=$(mktemp -d)
	trap 'git worktree remove --force "$tmp/src" 2>/dev/null; rm -rf "$tmp"' EXIT
	git worktree add --quiet --detach "$tmp/src" "$1"
	cd "$tmp/src" && go build -o "$root/bin/router-before" ./cmd/router
)
if [ -n "${BENCH_ROUTER_BEFORE:-}" ]; then
	rev=$(git rev-parse --short --verify --quiet "$BENCH_ROUTER_BEFORE^{commit}") ||
		{ echo "BENCH_ROUTER_BEFORE=$BENCH_ROUTER_BEFORE is not a revision" >&2; exit 1; }
	echo ">> building the router at $rev into bin/router-before"
	build_before "$rev"
	set -- "$@" -before "$root/bin/router-before" -before-label "$rev"
fi

if [ -x "$KSERVE_ROUTER" ]; then
	set -- "$@" -kserve "$KSERVE_ROUTER" -kserve-version "$KSERVE_VERSION"
else
	set -- "$@" -kserve-error "hack/build-tool.sh kserve failed: $(tail -n 3 bin/kserve-build.log | tr '\n' ' ')"
	echo "KServe's router could not be built (bin/kserve-build.log): measuring against the direct chain only" >&2
fi

if command -v ip >/dev/null && unshare --net true 2>/dev/null; then
	echo ">> running in a network namespace of its own (loopback only)"
	exec unshare --net sh -c 'ip link set lo up && exec "$0" "$@"' "$root/bin/bench-router" "$@"
fi
exec "$root/bin/bench-router" "$@"
