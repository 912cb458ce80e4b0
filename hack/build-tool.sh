#!/usr/bin/env bash
# build-tool.sh KIND DEST_DIR — builds pinned tools from the Go module proxy into DEST_DIR.
#   kube: kube-apiserver, kube-controller-manager, kube-scheduler, kubectl (hack/tools/kube);
#         KUBE_COMMANDS names others of k8s.io/kubernetes/cmd (kubelet, kube-proxy)
#   containerd: containerd, containerd-shim-runc-v2, ctr (hack/tools/containerd)
#   cni:  the CNI plugins bridge, host-local, loopback, portmap (hack/tools/cni)
#   coredns: CoreDNS with the plugins of the cluster's DNS (hack/tools/coredns)
#   etcd: etcd (hack/tools/etcd)
#   codegen: client-gen, lister-gen, informer-gen, applyconfiguration-gen (hack/tools/codegen)
#   olm:  operator-sdk, scorecard-test, opm and grpc_health_probe (hack/tools/olm)
#   catalog-server: opm and grpc_health_probe for linux/$GOARCH, the catalog image's binaries
#         (hack/tools/olm)
#   lifecycle: OLM's olm-operator (olm) and catalog-operator (catalog), and OLM's CRDs
#         (crds/) from the same module (hack/tools/lifecycle)
#   kserve: KServe's InferenceGraph router, for make bench-router (hack/tools/kserve)
#   kal:  golangci-lint with kube-api-linter built in, for make lint over api/v1 (hack/tools/kal)
#   helm: helm, for the chart's lint, rendering and install tests (hack/tools/helm)
#   prometheus: the Prometheus server that hack/tools/prometheus-config's Prometheus Operator
#         generates configurations for, for the monitoring test of the real nodes
#         (hack/tools/prometheus)
# The result is cached: DEST_DIR is keyed by version, so a fresh clone reuses it.
set -euo pipefail
kind=$1 dest=$2
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$dest"
tmp="$(mktemp -d "$dest/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

case "$kind" in
kube)
	cd "$here/tools/kube"
	version=$(awk '$1=="require" && $2=="k8s.io/kubernetes" {print $3}' go.mod)
	major=${version#v}; major=${major%%.*}
	minor=${version#v*.}; minor=${minor%%.*}
	pkgs=(k8s.io/component-base/version k8s.io/client-go/pkg/version)
	ldflags="-s -w"
	for p in "${pkgs[@]}"; do
		ldflags+=" -X $p.gitVersion=$version -X $p.gitMajor=$major -X $p.gitMinor=$minor"
		ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
	done
	for cmd in ${KUBE_COMMANDS:-kube-apiserver kube-controller-manager kube-scheduler kubectl}; do
		[ -x "$dest/$cmd" ] && continue
		echo ">> building $cmd $version from the Go module proxy (several minutes on a cold cache)"
		start=$SECONDS
		CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$tmp/$cmd" "k8s.io/kubernetes/cmd/$cmd"
		mv "$tmp/$cmd" "$dest/$cmd"
		echo ">> $cmd built in $((SECONDS - start))s"
	done
	;;
etcd)
	cd "$here/tools/etcd"
	[ -x "$dest/etcd" ] && exit 0
	echo ">> building etcd from the Go module proxy (about a minute on a cold cache)"
	CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3
	mv "$tmp/etcd" "$dest/etcd"
	;;
codegen)
	cd "$here/tools/codegen"
	for cmd in applyconfiguration-gen client-gen informer-gen lister-gen; do
		[ -x "$dest/$cmd" ] && continue
		echo ">> building $cmd from the Go module proxy"
		CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$tmp/$cmd" "k8s.io/code-generator/cmd/$cmd"
		mv "$tmp/$cmd" "$dest/$cmd"
	done
	;;
olm)
	cd "$here/tools/olm"
	[ -x "$dest/operator-sdk" ] && [ -x "$dest/scorecard-test" ] && [ -x "$dest/opm" ] && [ -x "$dest/grpc_health_probe" ] && exit 0
	sdk=$(awk '$1=="github.com/operator-framework/operator-sdk" {print $2}' go.mod)
	opm=$(awk '$1=="github.com/operator-framework/operator-registry" {print $2}' go.mod)
	kube=$(awk '$1=="k8s.io/client-go" {sub(/^v0\./, "v1.", $2); print $2}' go.mod)
	v=github.com/operator-framework/operator-sdk/internal/version
	ldflags="-s -w -X $v.Version=$sdk -X $v.GitVersion=$sdk -X $v.ImageVersion=$sdk -X $v.KubernetesVersion=$kube"
	ldflags+=" -X github.com/operator-framework/operator-registry/cmd/opm/version.opmVersion=$opm"
	# Without these tags containers/image wants gpgme and the btrfs and devicemapper headers (cgo).
	tags=${OLM_BUILD_TAGS:-containers_image_openpgp,exclude_graphdriver_btrfs,exclude_graphdriver_devicemapper}
	echo ">> building operator-sdk $sdk, scorecard-test, opm $opm and grpc_health_probe from the Go module proxy (several minutes on a cold cache)"
	start=$SECONDS
	CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -tags "$tags" -ldflags "$ldflags" -o "$tmp/" \
		github.com/operator-framework/operator-sdk/cmd/operator-sdk \
		github.com/operator-framework/operator-sdk/images/scorecard-test \
		github.com/operator-framework/operator-registry/cmd/opm \
		github.com/grpc-ecosystem/grpc-health-probe
	mv "$tmp/grpc-health-probe" "$tmp/grpc_health_probe"
	mv "$tmp/operator-sdk" "$tmp/scorecard-test" "$tmp/opm" "$tmp/grpc_health_probe" "$dest/"
	echo ">> OLM tools built in $((SECONDS - start))s"
	;;
catalog-server)
	cd "$here/tools/olm"
	[ -x "$dest/opm" ] && [ -x "$dest/grpc_health_probe" ] && exit 0
	: "${GOARCH:?GOARCH names the architecture to build for}"
	opm=$(awk '$1=="github.com/operator-framework/operator-registry" {print $2}' go.mod)
	tags=${OLM_BUILD_TAGS:-containers_image_openpgp,exclude_graphdriver_btrfs,exclude_graphdriver_devicemapper}
	echo ">> building opm $opm and grpc_health_probe for linux/$GOARCH from the Go module proxy (minutes on a cold cache)"
	start=$SECONDS
	CGO_ENABLED=0 GOOS=linux GOFLAGS=-mod=mod go build -trimpath -tags "$tags" \
		-ldflags "-s -w -X github.com/operator-framework/operator-registry/cmd/opm/version.opmVersion=$opm" -o "$tmp/" \
		github.com/operator-framework/operator-registry/cmd/opm github.com/grpc-ecosystem/grpc-health-probe
	mv "$tmp/grpc-health-probe" "$dest/grpc_health_probe"
	mv "$tmp/opm" "$dest/"
	echo ">> opm and grpc_health_probe for linux/$GOARCH built in $((SECONDS - start))s"
	;;
lifecycle)
	cd "$here/tools/lifecycle"
	[ -x "$dest/olm" ] && [ -x "$dest/catalog" ] && [ -d "$dest/crds" ] && exit 0
	module=github.com/operator-framework/operator-lifecycle-manager
	version=$(awk -v m=$module '$1=="require" && $2==m {print $3}' go.mod)
	echo ">> building OLM $version (olm-operator, catalog-operator) from the Go module proxy (several minutes on a cold cache)"
	start=$SECONDS
	ldflags="-s -w -X $module/pkg/version.OLMVersion=${version#v}"
	CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$tmp/" "$module/cmd/olm" "$module/cmd/catalog"
	# The chart's CRDs are the only set in the module that includes OLMConfig.
	dir=$(GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' "$module")
	mkdir "$tmp/crds" && cp "$dir"/deploy/chart/crds/*.yaml "$tmp/crds/" && chmod u+w "$tmp"/crds/*.yaml
	rm -rf "$dest/crds"
	mv "$tmp/olm" "$tmp/catalog" "$tmp/crds" "$dest/"
	echo ">> OLM built in $((SECONDS - start))s"
	;;
kserve)
	cd "$here/tools/kserve"
	[ -x "$dest/kserve-router" ] && exit 0
	version=$(awk '$1=="require" && $2=="github.com/kserve/kserve" {print $3}' go.mod)
	echo ">> building KServe's InferenceGraph router $version from the Go module proxy (a few minutes on a cold cache)"
	start=$SECONDS
	CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$tmp/kserve-router" github.com/kserve/kserve/cmd/router
	mv "$tmp/kserve-router" "$dest/kserve-router"
	echo ">> KServe router built in $((SECONDS - start))s"
	;;
kal)
	cd "$here/tools/kal"
	[ -x "$dest/golangci-lint-kube-api-linter" ] && exit 0
	version=$(awk '$1=="require" && $2=="sigs.k8s.io/kube-api-linter" {print $3}' go.mod)
	echo ">> building kube-api-linter $version (a golangci-lint with it built in) from the Go module proxy (a few minutes on a cold cache)"
	start=$SECONDS
	CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$tmp/golangci-lint-kube-api-linter" \
		sigs.k8s.io/kube-api-linter/cmd/golangci-lint-kube-api-linter
	mv "$tmp/golangci-lint-kube-api-linter" "$dest/golangci-lint-kube-api-linter"
	echo ">> kube-api-linter built in $((SECONDS - start))s"
	;;
helm)
	cd "$here/tools/helm"
	[ -x "$dest/helm" ] && exit 0
	version=$(awk '$1=="require" && $2=="helm.sh/helm/v4" {print $3}' go.mod)
	echo ">> building helm $version from the Go module proxy (a few minutes on a cold cache)"
	start=$SECONDS
	CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$version" \
		-o "$tmp/helm" helm.sh/helm/v4/cmd/helm
	mv "$tmp/helm" "$dest/helm"
	echo ">> helm built in $((SECONDS - start))s"
	;;
prometheus)
	cd "$here/tools/prometheus"
	[ -x "$dest/prometheus" ] && exit 0
	version=$(awk '$1=="require" && $2=="github.com/prometheus/prometheus" {print $3}' go.mod)
	# Its module's v0.3XX.Y is Prometheus 3.XX.Y.
	minor=${version#v0.}; minor=${minor%%.*}
	release=3.$((10#$minor - 300)).${version##*.}
	echo ">> building Prometheus $release ($version) from the Go module proxy (a few minutes on a cold cache)"
	start=$SECONDS
	CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w -X github.com/prometheus/common/version.Version=$release" \
		-o "$tmp/prometheus" github.com/prometheus/prometheus/cmd/prometheus
	mv "$tmp/prometheus" "$dest/prometheus"
	echo ">> Prometheus built in $((SECONDS - start))s"
	;;
containerd)
	cd "$here/tools/containerd"
	[ -x "$dest/containerd" ] && [ -x "$dest/containerd-shim-runc-v2" ] && [ -x "$dest/ctr" ] && exit 0
	version=$(awk '$1=="require" && $2=="github.com/containerd/containerd/v2" {print $3}' go.mod)
	echo ">> building containerd $version (containerd, containerd-shim-runc-v2, ctr) from the Go module proxy (several minutes on a cold cache)"
	start=$SECONDS
	m=github.com/containerd/containerd/v2
	CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -tags no_btrfs,no_devmapper,no_zfs \
		-ldflags "-s -w -X $m/version.Version=$version -X $m/version.Revision=module-proxy" \
		-o "$tmp/" $m/cmd/containerd $m/cmd/containerd-shim-runc-v2 $m/cmd/ctr
	mv "$tmp/containerd" "$tmp/containerd-shim-runc-v2" "$tmp/ctr" "$dest/"
	echo ">> containerd built in $((SECONDS - start))s"
	;;
cni)
	cd "$here/tools/cni"
	[ -x "$dest/bridge" ] && [ -x "$dest/host-local" ] && [ -x "$dest/loopback" ] && [ -x "$dest/portmap" ] && exit 0
	echo ">> building the CNI plugins from the Go module proxy"
	p=github.com/containernetworking/plugins/plugins
	CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$tmp/" \
		$p/main/bridge $p/ipam/host-local $p/main/loopback $p/meta/portmap
	mv "$tmp/bridge" "$tmp/host-local" "$tmp/loopback" "$tmp/portmap" "$dest/"
	;;
coredns)
	cd "$here/tools/coredns"
	[ -x "$dest/coredns" ] && exit 0
	echo ">> building CoreDNS from the Go module proxy (a few minutes on a cold cache)"
	start=$SECONDS
	CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$tmp/coredns" .
	mv "$tmp/coredns" "$dest/coredns"
	echo ">> CoreDNS built in $((SECONDS - start))s"
	;;
*)
	echo "build-tool.sh: unknown tool kind $kind" >&2
	exit 2
	;;
esac
