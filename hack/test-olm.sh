#!/usr/bin/env bash
# test-olm.sh — make test-olm: on a local control plane of its own (hack/localcluster, in DIR),
#   1. test/install: the release manifest INSTALLER applied with kubectl and the Helm chart with
#      helm (and upgraded), the manager of this tree run as their pod would run it, the seed
#      Pipeline run and everything deleted;
#   2. test/olm: the previous release (the commit PREVIOUS_REV, its manager and bundle built from
#      a git archive of it) installed through OLM, upgraded to this release and to NEXT_VERSION
#      (hack/rehearse-release.sh adds that version to a copy of the catalog), and uninstalled.
# The control plane goes down at the end, whatever happens.
#
# The environment names what it runs on: DIR, INSTALLER, KUBECTL, HELM, OPM, OLM_DIR (OLM built
# from the Go module proxy), LOCALCLUSTER_FLAGS (the binaries of hack/localcluster up), CHANNEL,
# BUNDLE_IMAGE_BASE, NEXT_VERSION and PREVIOUS_REV.
set -euo pipefail
: "${DIR:?}" "${INSTALLER:?}" "${KUBECTL:?}" "${HELM:?}" "${OPM:?}" "${OLM_DIR:?}" "${LOCALCLUSTER_FLAGS:?}"
: "${CHANNEL:?}" "${BUNDLE_IMAGE_BASE:?}" "${NEXT_VERSION:?}" "${PREVIOUS_REV:?}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
mkdir -p "$DIR/bin"
dir="$(cd "$DIR" && pwd)"
read -r -a cluster_flags <<<"$LOCALCLUSTER_FLAGS"

echo ">> the managers: this tree's, and the previous release's ($PREVIOUS_REV)"
go build -o "$dir/bin/manager" ./cmd
git cat-file -e "$PREVIOUS_REV^{commit}" 2>/dev/null || {
	echo "test-olm: the previous release's commit $PREVIOUS_REV is not in this clone's history (a shallow clone?): fetch it" >&2
	exit 1
}
previous="$dir/previous"
rm -rf "$previous" && mkdir -p "$previous"
git archive "$PREVIOUS_REV" | tar -x -C "$previous"
(cd "$previous" && go build -o "$dir/bin/manager-previous" ./cmd)

localcluster=(go run ./hack/localcluster)
trap '"${localcluster[@]}" down -dir "$dir" >/dev/null' EXIT
"${localcluster[@]}" down -dir "$dir" >/dev/null
"${localcluster[@]}" up -dir "$dir" "${cluster_flags[@]}" -egress-socket "$dir/egress.sock"

echo ">> the release manifest and the Helm chart (test/install)"
INSTALL_KUBECONFIG="$dir/kubeconfig" INSTALLER="$INSTALLER" KUBECTL="$KUBECTL" HELM="$HELM" MANAGER="$dir/bin/manager" \
	INSTALL_EGRESS_SOCKET="$dir/egress.sock" INSTALL_LOG_DIR="$dir/logs/install" \
	go test ./test/install/ -count=1 -timeout 10m -v -ginkgo.v=false

echo ">> OLM: the previous release, then this one, then $NEXT_VERSION (test/olm)"
OLM_KUBECONFIG="$dir/kubeconfig" OLM_DIR="$OLM_DIR" OPM="$OPM" MANAGER="$dir/bin/manager" \
	PREVIOUS_MANAGER="$dir/bin/manager-previous" PREVIOUS_BUNDLE_DIR="$previous/bundle" \
	OLM_LOG_DIR="$dir/logs" OLM_CHANNEL="$CHANNEL" OLM_EGRESS_SOCKET="$dir/egress.sock" \
	hack/rehearse-release.sh "$OPM" "$CHANNEL" "$BUNDLE_IMAGE_BASE" "$NEXT_VERSION" \
	go test ./test/olm/ -count=1 -timeout 20m -v -ginkgo.v=false
