#!/usr/bin/env bash
# build-installer.sh KUSTOMIZE IMAGE CONFIG OUTPUT — writes the release manifest: the kustomize
# build of CONFIG (a directory under config/, e.g. config/default) with the manager image (which
# also runs every Pipeline's router) set to IMAGE, into OUTPUT (`-`: standard output).
# `make build-installer` writes dist/install.yaml with it; `make deploy` applies that file and
# `make undeploy` deletes what it names.
#
# The image is set in a temporary copy of config/, so that no file of the repository changes.
# IMAGE_DIGESTS=true names IMAGE by the digest its registry serves for it now (hack/set-image.sh).
set -euo pipefail
kustomize=$1 image=$2 config=$3 out=$4
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

case "$config" in
config | config/*) ;;
*)
	echo "build-installer.sh: CONFIG must be a directory under config/, not '$config'" >&2
	exit 2
	;;
esac
if [ ! -f "$root/$config/kustomization.yaml" ]; then
	echo "build-installer.sh: $config has no kustomization.yaml" >&2
	exit 2
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp -R "$root/config" "$tmp/config"
"$root/hack/set-image.sh" "$kustomize" "$image" "$tmp/config/manager" >/dev/null 2>"$tmp/set-image.log" || {
	cat "$tmp/set-image.log" >&2
	exit 1
}
"$kustomize" build "$tmp/$config" >"$tmp/install.yaml"

if [ "$out" = - ]; then
	cat "$tmp/install.yaml"
else
	mkdir -p "$(dirname "$out")"
	mv "$tmp/install.yaml" "$out"
fi
