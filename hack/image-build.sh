#!/usr/bin/env bash
# image-build.sh DOCKERFILE CONTEXT IMAGE ARCHIVE [BUD_ARGS...] — builds IMAGE from DOCKERFILE with buildah,
# without a container engine or daemon, and writes it to ARCHIVE as an OCI archive
# (push it to a registry with `buildah push IMAGE docker://...` or `skopeo copy oci-archive:...`).
#
# buildah comes from the Debian package: installed with apt-get when missing and running as
# root. The vfs storage driver and chroot isolation need no kernel overlay or user namespaces.
set -euo pipefail
dockerfile=$1 context=$2 image=$3 archive=$4
shift 4

if ! command -v buildah >/dev/null; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		echo ">> installing buildah (Debian package)"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q buildah >/dev/null ||
			{ apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q buildah >/dev/null; }
	else
		echo "image-build: buildah is required: install the buildah package (apt-get install buildah) and run again" >&2
		exit 1
	fi
fi

buildah=(buildah --storage-driver vfs)
# The previous build of IMAGE would stay behind untagged: every rebuild replaces it.
"${buildah[@]}" rmi "$image" >/dev/null 2>&1 || true
"${buildah[@]}" bud --isolation chroot --quiet "$@" -f "$dockerfile" -t "$image" "$context"
mkdir -p "$(dirname "$archive")"
rm -f "$archive"
"${buildah[@]}" push --quiet "$image" "oci-archive:$archive:$image"
echo ">> $image written to $archive"
