#!/usr/bin/env bash
# test-images.sh BUNDLE_IMG CATALOG_IMG CATALOG_TEST... — checks the images make bundle-build and catalog-build
# built (in buildah's vfs storage):
#   - the bundle image has the labels of bundle/metadata/annotations.yaml and exactly the files
#     of bundle/ at /manifests, /metadata and /tests/scorecard;
#   - the catalog image, run as its user (65532) in a chroot of its root file system, serves the
#     catalog: CATALOG_TEST (make test-bundle's registry API test) runs against it, with OPM
#     starting the image's own opm and CATALOG_DIR its /configs.
# Needs root (chroot, buildah mount); run from the repository root.
set -euo pipefail
bundle_img=$1 catalog_img=$2
shift 2
if [ "$(id -u)" != 0 ]; then
	echo "test-images: needs root (buildah mount and chroot)" >&2
	exit 1
fi
buildah=(buildah --storage-driver vfs)
containers=()
cleanup() {
	for c in "${containers[@]}"; do
		"${buildah[@]}" umount "$c" >/dev/null 2>&1 || true
		"${buildah[@]}" rm "$c" >/dev/null 2>&1 || true
	done
}
trap cleanup EXIT
# mount_image IMAGE — a working container of IMAGE, mounted; its root file system in $root.
mount_image() {
	local c
	c=$("${buildah[@]}" from -q "$1")
	containers+=("$c")
	root=$("${buildah[@]}" mount "$c")
}

# Bundle image: labels and files.
labels=$("${buildah[@]}" inspect --type image --format '{{range $k, $v := .OCIv1.Config.Labels}}{{$k}}: {{$v}}{{"\n"}}{{end}}' "$bundle_img" |
	grep '^operators[.]operatorframework[.]io' | sort)
annotations=$(awk '/^  operators[.]operatorframework[.]io/ {sub(/^  /, ""); print}' bundle/metadata/annotations.yaml | sort)
if [ -z "$annotations" ] || [ "$labels" != "$annotations" ]; then
	echo "test-images: the labels of $bundle_img differ from bundle/metadata/annotations.yaml:" >&2
	diff <(echo "$annotations") <(echo "$labels") >&2 || true
	exit 1
fi
mount_image "$bundle_img"
for d in manifests metadata tests/scorecard; do
	diff -r "bundle/$d" "$root/$d" >&2 || { echo "test-images: /$d of $bundle_img differs from bundle/$d" >&2; exit 1; }
done
echo "test-images: $bundle_img: labels and files match bundle/"

# Catalog image: serve it from its own root file system, as its own user, and query it.
mount_image "$catalog_img"
user=$("${buildah[@]}" inspect --type image --format '{{.OCIv1.Config.User}}' "$catalog_img")
tmp=$(mktemp -d)
trap 'cleanup; rm -rf "$tmp"' EXIT
cat >"$tmp/opm" <<EOF
#!/bin/sh
exec chroot --userspec=$user "$root" /bin/opm "\$@"
EOF
chmod +x "$tmp/opm"
OPM="$tmp/opm" CATALOG_DIR=/configs "$@"
echo "test-images: $catalog_img: serves the catalog as user $user"
