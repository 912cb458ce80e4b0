#!/usr/bin/env bash
# release.sh VERSION IMAGE_REPOSITORY OUT KUSTOMIZE HELM — writes every artifact of release
# VERSION into OUT (emptied first), each naming VERSION and the manager image by its digest:
#
#   pipeline-operator-image.tar    the manager image (manager and router) for linux/amd64 and
#                                  linux/arm64, one multi-platform OCI image layout named
#                                  IMAGE_REPOSITORY:vVERSION (push it with crane, skopeo or oras)
#   image-digest                   the digest of that image (its index)
#   install.yaml                   config/default, the image by digest
#   pipeline-operator-VERSION.tgz  the Helm chart, version and appVersion VERSION, the image by
#                                  digest (image.digest)
#   kubectl-pipeline_OS_ARCH.tar.gz  the plugin for linux, darwin and windows × amd64, arm64
#   kubectl-pipeline.krew.yaml     plugins/pipeline.yaml at VERSION with each archive's sha256
#   SHA256SUMS                     the sha256 of every file above
#
# Nothing is pushed or downloaded, and no file of the repository changes. `make release` runs it;
# test/release checks what it writes.
set -euo pipefail
version=$1 repo=$2 out=$3 kustomize=$4 helm=$5
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

(cd "$out" && sha256sum -- * >"$work/SHA256SUMS") && mv "$work/SHA256SUMS" "$out/SHA256SUMS"
echo ">> release $version written to $out ($image)"
