#!/usr/bin/env bash
# rehearse-release.sh OPM CHANNEL BUNDLE_IMAGE_BASE NEXT_VERSION TEST... — rehearses releasing
# the next version on copies of bundle/ and catalog/: the copied bundle becomes NEXT_VERSION,
# hack/catalog.sh adds it to the copied catalog, opm validates that, and TEST (the registry API
# test of make test-bundle) runs against it with CATALOG_DIR and BUNDLE_DIR set to the copies:
# the new version must be the head and replace the current one. Nothing in the tree changes.
set -euo pipefail
opm=$1 channel=$2 image_base=$3 next=$4
shift 4
here="$(cd "$(dirname "$0")" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp -r bundle catalog "$tmp/"
csv=("$tmp"/bundle/manifests/*.clusterserviceversion.yaml)
current=$(awk '/^  version: / {print $2; exit}' "${csv[0]}")
package=$(awk '/^  operators[.]operatorframework[.]io[.]bundle[.]package[.]v1: / {print $2}' "$tmp/bundle/metadata/annotations.yaml")
sed -i -e "s/^  version: $current\$/  version: $next/" -e "s/^  name: $package[.]v$current\$/  name: $package.v$next/" "${csv[0]}"
"$here/catalog.sh" "$opm" "$tmp/bundle" "$tmp/catalog" "$package" "$channel" "$image_base"
"$opm" validate "$tmp/catalog"
grep -q "^  replaces: $package[.]v$current\$" "$tmp/catalog/$package/index.yaml" ||
	{ echo "rehearse-release: $package.v$next does not replace $package.v$current" >&2; exit 1; }
echo "rehearse-release: $package.v$next replaces $package.v$current"
CATALOG_DIR="$tmp/catalog" BUNDLE_DIR="$tmp/bundle" "$@"
