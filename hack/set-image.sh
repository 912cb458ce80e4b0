#!/usr/bin/env bash
# set-image.sh KUSTOMIZE IMAGE DIR... — points the kustomize image `controller` (the manager, whose
# image also runs every Pipeline's router) of each kustomization DIR at IMAGE, and prints the
# reference it set.
#
# With IMAGE_DIGESTS=true the reference is IMAGE's repository by the digest its registry serves
# for IMAGE now (`repo@sha256:…`, no tag), asked by hack/imagedigest: a tag moved later then
# changes nothing that was deployed. When the registry cannot tell, it fails naming the image
# and changes nothing; it never falls back to the tag.
set -euo pipefail
kustomize=$1 image=$2
shift 2
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

case "${IMAGE_DIGESTS:-false}" in
false) ;;
true)
	bin="$(mktemp -d)"
	trap 'rm -rf "$bin"' EXIT
	go -C "$root" build -o "$bin/imagedigest" ./hack/imagedigest
	if ! resolved="$("$bin/imagedigest" "$image")"; then
		echo "IMAGE_DIGESTS=true: the digest of $image could not be resolved (above): nothing names the image by tag instead" >&2
		exit 1
	fi
	image=$resolved
	;;
*)
	echo "IMAGE_DIGESTS must be true or false, not '$IMAGE_DIGESTS'" >&2
	exit 1
	;;
esac

for dir in "$@"; do
	(cd "$dir" && "$kustomize" edit set image "controller=$image" >&2)
done
echo "$image"
