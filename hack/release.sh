#!/usr/bin/env bash
# release.sh VERSION IMAGE_REPOSITORY OUT — writes every artifact of release VERSION into OUT
# (emptied first), each naming VERSION and the manager image by its digest:
#
#   pipeline-operator-image.tar    the manager image (manager and router) for linux/amd64 and
#                                  linux/arm64, one multi-platform OCI image layout named
#                                  IMAGE_REPOSITORY:vVERSION (push it with crane, skopeo or oras)
#   image-digest                   the digest of that image (its index)
#   pipeline-operator-bundle-image.tar  the OLM bundle at VERSION (config/manifests, the manager
#                                  image by digest), IMAGE_REPOSITORY-bundle:vVERSION; its digest
#                                  in bundle-image-digest
#   pipeline-operator-catalog-image.tar  catalog/ with that bundle by digest, served by opm for
#                                  linux/amd64 and linux/arm64 (as catalog.Dockerfile builds
#                                  it), IMAGE_REPOSITORY-catalog:vVERSION; its digest in
#                                  catalog-image-digest
#   install.yaml                   config/default, the image by digest
#   pipeline-operator-VERSION.tgz  the Helm chart, version and appVersion VERSION, the image by
#                                  digest (image.digest)
#   kubectl-pipeline_OS_ARCH.tar.gz  the plugin for linux, darwin and windows × amd64, arm64
#   kubectl-pipeline.krew.yaml     plugins/pipeline.yaml at VERSION with each archive's sha256
#   SHA256SUMS                     the sha256 of every file above
#
# The tools come from the environment: KUSTOMIZE, HELM, OPERATOR_SDK, OPM (for this machine),
# CATALOG_SERVER (a directory of linux_ARCH/opm and linux_ARCH/grpc_health_probe per
# architecture), and BUNDLE_METADATA_OPTS (the bundle's channels, as `make bundle` gives them).
#
# Nothing is pushed or downloaded, and no file of the repository changes. `make release` runs it;
# test/release checks what it writes.
set -euo pipefail
version=$1 repo=$2 out=$3
kustomize=${KUSTOMIZE:?} helm=${HELM:?} operator_sdk=${OPERATOR_SDK:?} opm=${OPM:?} catalog_server=${CATALOG_SERVER:?}
read -r -a bundle_opts <<<"${BUNDLE_METADATA_OPTS:?}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
case "$version" in
[0-9]*.[0-9]*.[0-9]*) ;;
*)
	echo "release.sh: VERSION must be a semantic version (1.2.3, 1.2.3-rc.1), not '$version'" >&2
	exit 2
	;;
esac
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
rm -rf "$out"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
ldflags="-s -w -X github.com/ndsl-cn/pipeline-operator/internal/version.Version=$version"

echo ">> the manager image"
"$root/hack/manager-image.sh" "$version" "$repo:v$version" amd64,arm64 "$out/pipeline-operator-image.tar" "$out/image-digest"
image="$repo@$(cat "$out/image-digest")"

echo ">> install.yaml ($image)"
IMAGE_DIGESTS=false "$root/hack/build-installer.sh" "$kustomize" "$image" config/default "$out/install.yaml"

echo ">> the Helm chart"
cp -R "$root/charts/pipeline-operator" "$work/chart"
go -C "$root" run ./hack/helmchart -kustomize "$kustomize" -config config -chart "$work/chart" -version "$version"
sed -i "s|^  repository: .*|  repository: $repo|; s|^  digest: \"\"|  digest: \"${image#*@}\"|" "$work/chart/values.yaml"
grep -q "^  digest: \"${image#*@}\"" "$work/chart/values.yaml" || {
	echo "release.sh: the chart's values.yaml has no image.digest to set" >&2
	exit 1
}
"$helm" package "$work/chart" -d "$out" >/dev/null

echo ">> the kubectl plugin"
for platform in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64; do
	os=${platform%/*} arch=${platform#*/} exe=kubectl-pipeline
	[ "$os" = windows ] && exe=kubectl-pipeline.exe
	dir="$work/plugin/${os}_$arch"
	mkdir -p "$dir"
	CGO_ENABLED=0 GOOS=$os GOARCH=$arch go -C "$root" build -trimpath -ldflags="$ldflags" -o "$dir/$exe" ./cmd/kubectl-pipeline
	cp "$root/LICENSE" "$dir/"
	# The same inputs make the same archive: names sorted, times and owners fixed.
	tar -C "$dir" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - "$exe" LICENSE |
		gzip -n >"$out/kubectl-pipeline_${os}_$arch.tar.gz"
done
# The in-tree manifest at VERSION: its version and URLs, and each archive's sha256 after its uri;
# its comment (which says the sums are placeholders) replaced.
awk -v version="v$version" -v out="$out" '
	NR == 1 { print "# The krew manifest of kubectl-pipeline " version ": each archive of the release with its sha256." }
	/^#/ && !body { next }
	/^apiVersion:/ { body = 1 }
	/^  version: / { sub(/v[0-9][^ ]*$/, version) }
	/^    uri: / {
		sub(/\/download\/[^\/]+\//, "/download/" version "/")
		n = split($2, parts, "/"); file = out "/" parts[n]
		cmd = "sha256sum \"" file "\""
		if ((cmd | getline line) <= 0) { print "release.sh: no archive " file > "/dev/stderr"; exit 1 }
		close(cmd); split(line, sum, " ")
	}
	/^    sha256: / { if (sum[1] == "") { print "release.sh: a sha256 before its uri" > "/dev/stderr"; exit 1 }
		sub(/"[0-9a-f]*"/, "\"" sum[1] "\""); sum[1] = "" }
	{ print }
' "$root/plugins/pipeline.yaml" >"$out/kubectl-pipeline.krew.yaml"

echo ">> the OLM bundle"
# bundle.sh generates bundle/ where it runs: in a copy of the project's kustomizations.
mkdir "$work/project"
cp -R "$root/config" "$root/PROJECT" "$work/project/"
(cd "$work/project" && "$root/hack/bundle.sh" "$operator_sdk" "$kustomize" "$image" "$version" "${bundle_opts[@]}") >/dev/null
# The image bundle.Dockerfile describes: its labels, its files where it copies them.
flags=()
while read -r keyword from to; do
	case $keyword in
	LABEL) flags+=(-label "$from") ;;
	COPY) flags+=("$work/project/$from=${to%/}") ;;
	esac
done <"$work/project/bundle.Dockerfile"
go -C "$root" run ./hack/ociimage -o "$out/pipeline-operator-bundle-image.tar" -tag "$repo-bundle:v$version" -arch amd64,arm64 \
	-user "" -digest-file "$out/bundle-image-digest" "${flags[@]}" >/dev/null
bundle_image="$repo-bundle@$(cat "$out/bundle-image-digest")"

echo ">> the OLM catalog ($bundle_image)"
cp -R "$root/catalog" "$work/catalog"
package=$(awk '/^  operators[.]operatorframework[.]io[.]bundle[.]package[.]v1: / {print $2}' "$work/project/bundle/metadata/annotations.yaml")
channel=$(awk '/^  operators[.]operatorframework[.]io[.]bundle[.]channel[.]default[.]v1: / {print $2}' "$work/project/bundle/metadata/annotations.yaml")
"$root/hack/catalog.sh" "$opm" "$work/project/bundle" "$work/catalog" "$package" "$channel" "$repo-bundle" "$bundle_image"
"$opm" validate "$work/catalog"
# The serving cache, built before as catalog.Dockerfile does: the catalog starts without building it.
"$opm" serve "$work/catalog" --cache-dir="$work/cache" --cache-only 2>"$work/opm.log" || {
	cat "$work/opm.log" >&2
	echo "release.sh: opm could not build the catalog's serving cache (above)" >&2
	exit 1
}
configs=$(sed -n 's/^LABEL operators.operatorframework.io.index.configs.v1=//p' "$root/catalog.Dockerfile")
go -C "$root" run ./hack/ociimage -o "$out/pipeline-operator-catalog-image.tar" -tag "$repo-catalog:v$version" -arch amd64,arm64 \
	-entrypoint /bin/opm -cmd serve -cmd "$configs" -cmd --cache-dir=/tmp/cache -owned /tmp/cache \
	-label "operators.operatorframework.io.index.configs.v1=$configs" -digest-file "$out/catalog-image-digest" \
	"$catalog_server/linux_{arch}/opm=/bin/opm" "$catalog_server/linux_{arch}/grpc_health_probe=/bin/grpc_health_probe" \
	"$work/catalog=$configs" "$work/cache=/tmp/cache" >/dev/null

(cd "$out" && sha256sum -- * >"$work/SHA256SUMS") && mv "$work/SHA256SUMS" "$out/SHA256SUMS"
echo ">> release $version written to $out ($image)"
