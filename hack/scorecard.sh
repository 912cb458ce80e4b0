#!/usr/bin/env bash
# scorecard.sh SCORECARD_TEST BUNDLE_DIR — runs every test of BUNDLE_DIR/tests/scorecard/config.yaml
# with the scorecard-test binary, without a cluster, and fails unless each one passes.
#
# `operator-sdk scorecard` runs scorecard-test in a pod with the bundle unpacked at /bundle, a
# path compiled into the binary. Here the unmodified binary runs in a throw-away root directory
# holding only itself and a copy of the bundle at /bundle: through chroot when run as root,
# otherwise in a user namespace (unshare --map-root-user --root).
set -euo pipefail
scorecard_test=$1 bundle=$2
config="$bundle/tests/scorecard/config.yaml"

# The test name is the entrypoint element after scorecard-test, in every test of the configuration.
mapfile -t tests < <(awk 'prev ~ /^ *- scorecard-test$/ { print $2 } { prev = $0 }' "$config")
# The configuration must keep every built-in test.
for want in basic-check-spec olm-bundle-validation olm-crds-have-validation olm-crds-have-resources \
	olm-spec-descriptors olm-status-descriptors; do
	if ! printf '%s\n' "${tests[@]}" | grep -qx -- "$want"; then
		echo "scorecard: $config does not run the built-in test $want" >&2
		exit 1
	fi
done

root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
cp "$scorecard_test" "$root/scorecard-test"
cp -r "$bundle" "$root/bundle"

run() {
	if [ "$(id -u)" = 0 ]; then
		chroot "$root" /scorecard-test "$1"
	else
		unshare --map-root-user --root="$root" /scorecard-test "$1"
	fi
}

failed=0
for t in "${tests[@]}"; do
	out="$(run "$t")" || { echo "scorecard: $t: scorecard-test exited with an error" >&2; echo "$out" >&2; failed=1; continue; }
	# The output is a TestStatus: one result with its state, errors and suggestions.
	states="$(grep -o '"state": "[a-z]*"' <<<"$out" | cut -d'"' -f4 | sort -u | tr '\n' ' ')"
	if [ "$states" = "pass " ]; then
		echo "scorecard: $t: pass"
	else
		echo "scorecard: $t: ${states:-no result}" >&2
		echo "$out" >&2
		failed=1
	fi
done
exit "$failed"
