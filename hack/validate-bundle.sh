#!/usr/bin/env bash
# validate-bundle.sh OPERATOR_SDK BUNDLE_DIR — validates the bundle with every optional validator
# of the operatorframework suite (OperatorHub, good practices, deprecated APIs, ...) and fails on
# any error and on any warning but one.
#
# The one accepted warning: the deprecated-APIs validator flags every RBAC rule on the resource
# events of the group events.k8s.io as "removed in v1.25", because events.k8s.io/v1beta1 was. A
# rule names no version; the operator records its events through events.k8s.io/v1 (GA since
# Kubernetes 1.19), which is not removed. The warning is accepted only when it lists nothing but
# events.
set -euo pipefail
operator_sdk=$1 bundle=$2

if ! out="$("$operator_sdk" bundle validate "$bundle" --select-optional suite=operatorframework 2>&1)"; then
	echo "$out" >&2
	exit 1
fi
echo "$out"

accepted='removed in v1[.]25[.].*Migrate the API[(]s[)] for events: [(][^)]*[)]"$'
warnings="$(grep -i 'level=warn\|WARN' <<<"$out" || true)"
unexpected="$(grep -v "$accepted" <<<"$warnings" || true)"
if [ -n "$unexpected" ]; then
	echo "bundle validation reported warnings:" >&2
	echo "$unexpected" >&2
	exit 1
fi
if [ -n "$warnings" ]; then
	echo "bundle: valid; accepted the deprecated-APIs warning on events.k8s.io events (the operator uses events.k8s.io/v1)"
else
	echo "bundle: valid, no warnings"
fi
