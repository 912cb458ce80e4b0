#!/usr/bin/env bash
# manager-image.sh VERSION REF ARCHS OUT [DIGEST_FILE] — makes the manager image (the manager and
# the router, as the Dockerfile builds them, stamped VERSION) for each of the comma-separated
# ARCHS without a container engine (hack/ociimage): one multi-platform OCI image layout (a tar)
# named REF at OUT, its digest written to DIGEST_FILE when given. Its base is made from Debian's
# packages (hack/debian-base.sh), as the Dockerfile's distroless/static is. `make local-images`
# and `make release` make it so.
set -euo pipefail
version=$1 ref=$2 archs=$3 out=$4 digest_file=${5:-}
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$(mktemp -d)"
trap 'rm -rf "$bin"' EXIT
ldflags="-s -w -X github.com/ndsl-cn/pipeline-operator/internal/version.Version=$version"
for arch in ${archs//,/ }; do
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch go -C "$root" build -trimpath -ldflags="$ldflags" -o "$bin/$arch/manager" ./cmd
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch go -C "$root" build -trimpath -ldflags="$ldflags" -o "$bin/$arch/router" ./cmd/router
done
"$root/hack/debian-base.sh" "$bin/base"
go -C "$root" run ./hack/ociimage -o "$(realpath -m "$out")" -tag "$ref" -arch "$archs" -entrypoint /manager \
	${digest_file:+-digest-file "$(realpath -m "$digest_file")"} "$bin/base/etc=/etc" "$bin/base/usr=/usr" "$bin/base/var=/var" \
	"$bin/{arch}/manager=/manager" "$bin/{arch}/router=/router"
