# pipeline-operator — run `make help` for the targets.

VERSION ?= 0.2.0
IMAGE_TAG_BASE ?= ghcr.io/ndsl-cn/pipeline-operator
IMG ?= $(IMAGE_TAG_BASE):v$(VERSION)
# The release every binary says it is (--version, the start-up log, the *_build_info metrics).
VERSION_LDFLAGS = -X github.com/ndsl-cn/pipeline-operator/internal/version.Version=$(VERSION)
# IMAGE_DIGESTS=true: make bundle, make build-installer and make deploy name the manager image
# (which also runs every Pipeline's router) as $(IMG)'s repository by the digest its registry
# serves for $(IMG) now, asked by hack/imagedigest, and fail when the registry cannot tell
# (docs/security.md#images).
IMAGE_DIGESTS ?= false
# OLM: the bundle image, its channels and the file-based catalog image.
BUNDLE_IMG ?= $(IMAGE_TAG_BASE)-bundle:v$(VERSION)
CATALOG_IMG ?= $(IMAGE_TAG_BASE)-catalog:v$(VERSION)
CHANNELS ?= candidate
DEFAULT_CHANNEL ?= $(CHANNELS)
BUNDLE_METADATA_OPTS ?= --channels=$(CHANNELS) --default-channel=$(DEFAULT_CHANNEL)
# Images built with buildah are written here as OCI archives.
IMAGE_DIR ?= $(CURDIR)/.images

# Tools are built from the Go module proxy into a cache outside the clone, keyed by version,
# so every clone on this machine shares them.
CACHE_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/pipeline-operator
KUBE_VERSION := $(shell awk '$$1=="require" && $$2=="k8s.io/kubernetes" {print $$3}' hack/tools/kube/go.mod)
ETCD_VERSION := $(shell awk '$$1=="require" && $$2=="go.etcd.io/etcd/server/v3" {print $$3}' hack/tools/etcd/go.mod)
CODEGEN_VERSION := $(shell awk '$$1=="require" && $$2=="k8s.io/code-generator" {print $$3}' hack/tools/codegen/go.mod)
KSERVE_VERSION := $(shell awk '$$1=="require" && $$2=="github.com/kserve/kserve" {print $$3}' hack/tools/kserve/go.mod)
CONTROLLER_TOOLS_VERSION ?= v0.23.0
KUSTOMIZE_VERSION ?= v5.8.2
GOLANGCI_LINT_VERSION ?= v2.15.0
KAL_VERSION := $(shell awk '$$1=="require" && $$2=="sigs.k8s.io/kube-api-linter" {print $$3}' hack/tools/kal/go.mod)
KWOK_VERSION ?= v0.8.0
OPERATOR_SDK_VERSION := $(shell awk '$$1=="github.com/operator-framework/operator-sdk" {print $$2}' hack/tools/olm/go.mod)
OPM_VERSION := $(shell awk '$$1=="github.com/operator-framework/operator-registry" {print $$2}' hack/tools/olm/go.mod)
# Without these tags containers/image wants gpgme and the btrfs and devicemapper headers (cgo).
# The catalog test is built with the same tags and flags as the OLM tools, so it reuses their
# compiled packages.
export OLM_BUILD_TAGS := containers_image_openpgp,exclude_graphdriver_btrfs,exclude_graphdriver_devicemapper
CATALOG_TEST = (cd hack/tools/olm && CGO_ENABLED=0 GOFLAGS=-mod=mod go test -trimpath -tags $(OLM_BUILD_TAGS) ./catalogcheck/ -count=1 -v)

OLM_VERSION := $(shell awk '$$1=="require" && $$2=="github.com/operator-framework/operator-lifecycle-manager" {print $$3}' hack/tools/lifecycle/go.mod)

KUBE_BIN_DIR := $(CACHE_DIR)/kube-$(KUBE_VERSION)
ETCD_DIR := $(CACHE_DIR)/etcd-$(ETCD_VERSION)
CODEGEN_DIR := $(CACHE_DIR)/code-generator-$(CODEGEN_VERSION)
ENVTEST_ASSETS := $(CACHE_DIR)/envtest-$(KUBE_VERSION)-$(ETCD_VERSION)
CONTROLLER_GEN := $(CACHE_DIR)/controller-gen-$(CONTROLLER_TOOLS_VERSION)/controller-gen
KUSTOMIZE := $(CACHE_DIR)/kustomize-$(KUSTOMIZE_VERSION)/kustomize
GOLANGCI_LINT := $(CACHE_DIR)/golangci-lint-$(GOLANGCI_LINT_VERSION)/golangci-lint
# golangci-lint with kube-api-linter built in, for the v1 API.
KAL := $(CACHE_DIR)/kube-api-linter-$(KAL_VERSION)/golangci-lint-kube-api-linter
HELM_VERSION := $(shell awk '$$1=="require" && $$2=="helm.sh/helm/v4" {print $$3}' hack/tools/helm/go.mod)
HELM := $(CACHE_DIR)/helm-$(HELM_VERSION)/helm
# A real Prometheus (hack/tools/prometheus), the release the Prometheus Operator's configuration
# generator (hack/tools/prometheus-config, built into bin/) is made for, for make test-realnodes.
PROMETHEUS_VERSION := $(shell awk '$$1=="require" && $$2=="github.com/prometheus/prometheus" {print $$3}' hack/tools/prometheus/go.mod)

PROMETHEUS := $(CACHE_DIR)/prometheus-$(PROMETHEUS_VERSION)/prometheus
KWOK := $(CACHE_DIR)/kwok-$(KWOK_VERSION)/kwok
KUBECTL := $(KUBE_BIN_DIR)/kubectl
# The kubectl of make install, uninstall, deploy and undeploy: the one on PATH, else one built
# alone (cmd/kubectl, not the control plane) into the tool cache.
KUBECTL_ALONE := $(CACHE_DIR)/kubectl-$(KUBE_VERSION)/kubectl
DEPLOY_KUBECTL ?= $(or $(shell command -v kubectl 2>/dev/null),$(KUBECTL_ALONE))
OLM_TOOLS_DIR := $(CACHE_DIR)/olm-$(OPERATOR_SDK_VERSION)-$(OPM_VERSION)
OPERATOR_SDK := $(OLM_TOOLS_DIR)/operator-sdk
SCORECARD_TEST := $(OLM_TOOLS_DIR)/scorecard-test
OPM := $(OLM_TOOLS_DIR)/opm
GRPC_HEALTH_PROBE := $(OLM_TOOLS_DIR)/grpc_health_probe
# The catalog image's opm and grpc_health_probe, per architecture (linux_ARCH/), for make release.
CATALOG_SERVER := $(OLM_TOOLS_DIR)/catalog-server
CATALOG_SERVER_BINS := $(CATALOG_SERVER)/linux_amd64/opm $(CATALOG_SERVER)/linux_arm64/opm
# Operator Lifecycle Manager itself (olm-operator, catalog-operator, its CRDs), for make test-olm.
OLM_DIR := $(CACHE_DIR)/operator-lifecycle-manager-$(OLM_VERSION)
KSERVE_ROUTER := $(CACHE_DIR)/kserve-router-$(KSERVE_VERSION)/kserve-router
# The real nodes of the local cluster: kubelet and kube-proxy (KUBE_BIN_DIR), containerd, the CNI
# plugins and CoreDNS (keyed by its plugin list too), from the Go module proxy; runc and the
# netfilter tools from Debian (hack/realnodes-packages.sh).
CONTAINERD_VERSION := $(shell awk '$$1=="require" && $$2=="github.com/containerd/containerd/v2" {print $$3}' hack/tools/containerd/go.mod)
CNI_VERSION := $(shell awk '$$1=="require" && $$2=="github.com/containernetworking/plugins" {print $$3}' hack/tools/cni/go.mod)
COREDNS_VERSION := $(shell awk '$$1=="require" && $$2=="github.com/coredns/coredns" {print $$3}' hack/tools/coredns/go.mod)
CONTAINERD_DIR := $(CACHE_DIR)/containerd-$(CONTAINERD_VERSION)
CNI_DIR := $(CACHE_DIR)/cni-$(CNI_VERSION)
COREDNS := $(CACHE_DIR)/coredns-$(COREDNS_VERSION)-$(shell sha256sum hack/tools/coredns/main.go | cut -c1-8)/coredns
# The real nodes make demo and make test-realnodes start (simulated ones without root), and the
# images every real node imports: there is no registry to pull from.
REAL_NODES ?= node-a,node-b
MODELSERVER_IMG ?= localhost/modelserver:v$(VERSION)
LOCAL_IMAGES := $(IMAGE_DIR)/pause.tar $(IMAGE_DIR)/manager-local.tar $(IMAGE_DIR)/modelserver.tar

# The local control plane: state, kubeconfig and logs.
LOCAL_DIR ?= $(CURDIR)/.local
# make test-olm's own control plane, and the version its upgrade goes to (hack/rehearse-release.sh).
OLM_LOCAL_DIR := $(LOCAL_DIR)/olm
OLM_NEXT_VERSION ?= 99.0.0
# The release before this one (0.1.0, the last to serve v1beta1 alone): make test-olm installs it
# and upgrades from it, with the manager and the bundle built from its commit (git archive).
OLM_PREVIOUS_REV ?= 4413a8eca254e27411ef019d49546a919f293229
LOCAL_KUBECONFIG := $(LOCAL_DIR)/kubeconfig
LOCALCLUSTER := go run ./hack/localcluster

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
export GOFLAGS := -buildvcs=false

# What make verify regenerates and compares with the commit.
GENERATED := api config internal cmd pkg bundle bundle.Dockerfile catalog charts

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

# The API packages the CRDs are made from: both versions of the Pipeline.
CRD_PATHS := ./api/...
# The packages whose markers make the RBAC, webhook and deepcopy code: named, so that a checkout
# under .local (the previous release that make test-olm builds) is never read.
MARKER_PATHS := {./api/...,./internal/...,./cmd/...}

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate the CRD, RBAC and webhook manifests.
	$(CONTROLLER_GEN) rbac:roleName=manager-role webhook paths="$(MARKER_PATHS)"
	$(CONTROLLER_GEN) crd paths="$(CRD_PATHS)" output:crd:artifacts:config=config/crd/bases

.PHONY: generate
generate: $(CONTROLLER_GEN) $(CODEGEN_DIR)/client-gen ## Generate DeepCopy code, the Go client (pkg/client) and the Open Inference Protocol's gRPC code (internal/router/oip/inferencepb).
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="$(MARKER_PATHS)"
	hack/update-codegen.sh $(CODEGEN_DIR)
	hack/protogen.sh

.PHONY: fmt
fmt: ## Run go fmt.
	go fmt ./...

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: $(GOLANGCI_LINT) $(KAL) ## Run golangci-lint, and kube-api-linter over the v1 API (.golangci-kal.yml).
	$(GOLANGCI_LINT) run
	$(KAL) run --config .golangci-kal.yml ./api/v1/...

.PHONY: verify
verify: manifests generate fmt bundle catalog helm-chart ## Regenerate code, manifests, bundle, catalog and the Helm chart; fail when the tree changes.
	@if [ -n "$$(git status --porcelain -- $(GENERATED))" ]; then \
		echo "generated files are stale: run 'make manifests generate fmt bundle catalog helm-chart' and commit:"; \
		git status --porcelain -- $(GENERATED); git --no-pager diff --stat; exit 1; fi

.PHONY: test
test: test-unit test-rules test-bundle test-release test-integration test-faults test-fuzz test-e2e test-realnodes test-olm ## Run every test: unit, alert rules, OLM bundle and catalog, integration (envtest), fault injection, fuzzing, end-to-end and OLM.

.PHONY: test-unit
test-unit: vet $(KUSTOMIZE) $(OPERATOR_SDK) $(HELM) ## Every unit test of the tree as it is (no apiserver; the image digests against an in-memory registry on loopback), the import-direction guard and the Helm chart's rendering and lint included.
	KUSTOMIZE=$(KUSTOMIZE) OPERATOR_SDK=$(OPERATOR_SDK) HELM=$(HELM) \
		go test ./api/... ./config/... ./internal/... ./cmd/... ./examples/... ./test/bench/... ./hack/imagedigest/ ./hack/helmchart/ ./hack/localcluster/ ./hack/ociimage/ ./docs/ -skip '^(TestIntegration|FuzzPipeline$$)' -count=1
	$(MAKE) test-router-platforms

.PHONY: test-router-platforms
test-router-platforms: ## The router's tests under the race detector and on linux/386 (built only, where the kernel runs no 386 programs), and its build for linux/arm64.
	go test -race ./internal/router/... ./cmd/router/ -count=1
	@if hack/runs-linux-386.sh; then GOOS=linux GOARCH=386 go test ./internal/router/... ./cmd/router/ -count=1; \
	else echo "test-router-platforms: this kernel does not run linux/386 programs: the router's tests are built for linux/386, not run"; \
		GOOS=linux GOARCH=386 go test -exec true ./internal/router/... ./cmd/router/ -count=1; fi
	GOOS=linux GOARCH=arm64 go vet ./internal/router/... ./cmd/router/
	GOOS=linux GOARCH=arm64 go build -o /dev/null ./cmd/router

.PHONY: test-rules
test-rules: ## Check the alerting rules and dashboard with Prometheus's rule parser and engine.
	cd hack/tools/rulecheck && GOFLAGS=-mod=mod go test ./... -count=1

.PHONY: test-bundle
test-bundle: $(OPERATOR_SDK) $(SCORECARD_TEST) $(OPM) ## Validate bundle/ (operatorframework suite, no warnings), run its six scorecard tests, validate and serve catalog/.
	hack/validate-bundle.sh $(OPERATOR_SDK) bundle
	hack/scorecard.sh $(SCORECARD_TEST) bundle
	$(OPM) validate catalog
	export OPM=$(OPM) CATALOG_DIR=$(CURDIR)/catalog BUNDLE_DIR=$(CURDIR)/bundle PACKAGE=pipeline-operator \
		CHANNEL=$(DEFAULT_CHANNEL) BUNDLE_IMAGE_BASE=$(IMAGE_TAG_BASE)-bundle && $(CATALOG_TEST) && \
	hack/rehearse-release.sh $(OPM) $(DEFAULT_CHANNEL) $(IMAGE_TAG_BASE)-bundle 99.0.0 sh -c '$(CATALOG_TEST)'

.PHONY: test-integration
test-integration: manifests generate envtest $(KUSTOMIZE) ## Integration tests against a real kube-apiserver and etcd.
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) KUSTOMIZE=$(KUSTOMIZE) go test ./internal/... ./pkg/... ./config/... -run 'TestIntegration|FuzzPipeline' -count=1 -timeout 20m

# Where make test-faults writes its figures (docs/reliability.md); empty: printed only.
FAULTS_OUTPUT ?=

.PHONY: test-faults
test-faults: manifests envtest ## Fault injection against a real kube-apiserver and etcd: restarts, kills, injected errors, drift, deletes, failover (figures to $$FAULTS_OUTPUT).
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) FAULTS_OUTPUT=$(if $(FAULTS_OUTPUT),$(abspath $(FAULTS_OUTPUT))) \
		go test ./test/faults/ -run TestFaults -count=1 -timeout 30m -v

.PHONY: test-e2e
test-e2e: manifests local-tools ## End-to-end tests on the local control plane (started if needed, stopped after).
	@started=; if ! $(LOCALCLUSTER) status -dir $(LOCAL_DIR) >/dev/null 2>&1; then started=1; fi; \
	trap '[ -z "$$started" ] || $(MAKE) -s local-down' EXIT; \
	$(MAKE) -s local-up REAL_NODES= && \
	KUBECONFIG=$(LOCAL_KUBECONFIG) $(MAKE) -s deploy DEPLOY_KUBECTL=$(KUBECTL) && \
	E2E_KUBECONFIG=$(LOCAL_KUBECONFIG) KUBECTL=$(KUBECTL) go test ./test/e2e/ -count=1 -timeout 20m -v -ginkgo.v=false

.PHONY: test-olm
test-olm: local-tools $(OLM_DIR)/olm $(OPM) $(HELM) build-installer ## On a local control plane of its own: install the release manifest $(INSTALLER) with kubectl and the Helm chart with helm (and upgrade it), run the seed and delete it all; then install the previous release through OLM (built from the Go module proxy), upgrade to this one and to the next, uninstall.
	DIR=$(OLM_LOCAL_DIR) INSTALLER=$(abspath $(INSTALLER)) KUBECTL=$(KUBECTL) HELM=$(HELM) OPM=$(OPM) OLM_DIR=$(OLM_DIR) \
	LOCALCLUSTER_FLAGS="-kube-bin $(KUBE_BIN_DIR) -etcd $(ETCD_DIR)/etcd -kwok $(KWOK) -kwok-version $(KWOK_VERSION)" \
	CHANNEL=$(DEFAULT_CHANNEL) BUNDLE_IMAGE_BASE=$(IMAGE_TAG_BASE)-bundle NEXT_VERSION=$(OLM_NEXT_VERSION) PREVIOUS_REV=$(OLM_PREVIOUS_REV) \
	hack/test-olm.sh

# A number of runs (Nx) rather than a duration: the run's length does not depend on the machine's load.
FUZZTIME ?= 5000x

.PHONY: test-realnodes
test-realnodes: local-tools node-tools local-images build-installer $(HELM) $(PROMETHEUS) ## On a cluster of its own with real nodes $(REAL_NODES) (root; skipped without): the operator from the release manifest and its image, model servers, the router, DNS and kube-proxy in real containers, scraped by a real Prometheus configured by the Prometheus Operator's generator; then the cluster goes down and the machine is checked to be as it was.
	go build -o bin/localcluster ./hack/localcluster
	CGO_ENABLED=0 GOFLAGS=-mod=mod go build -C hack/tools/prometheus-config -trimpath -o $(CURDIR)/bin/prometheus-config .
	$(KUSTOMIZE) build config/prometheus > bin/prometheus-monitoring.yaml
	REALNODES_DIR=$(LOCAL_DIR)/realnodes REALNODES_VERSION=$(VERSION) REALNODES_MANAGER_ARCHIVE=$(IMAGE_DIR)/manager-local.tar REALNODES_INSTALLER=$(abspath $(INSTALLER)) REALNODES_MODELSERVER_IMAGE=$(MODELSERVER_IMG) KUBECTL=$(KUBECTL) \
	REALNODES_MODELSERVER_ARCHIVE=$(IMAGE_DIR)/modelserver.tar HELM=$(HELM) \
	REALNODES_PROMETHEUS=$(PROMETHEUS) REALNODES_PROMETHEUS_CONFIG=$(CURDIR)/bin/prometheus-config REALNODES_MONITORING=$(CURDIR)/bin/prometheus-monitoring.yaml \
	REALNODES_LOCALCLUSTER="$(CURDIR)/bin/localcluster -kube-bin $(KUBE_BIN_DIR) -etcd $(ETCD_DIR)/etcd -kwok $(KWOK) -kwok-version $(KWOK_VERSION) -nodes= $(subst $(,)$(IMAGE_DIR)/modelserver.tar,,$(REAL_NODE_FLAGS))" \
	go test ./test/realnodes/ -count=1 -timeout 25m -v

.PHONY: test-fuzz
test-fuzz: manifests ## Fuzz defaulting, admission (CRD schema, CEL, webhook), the child builders, the router's JSON decoding, its reading by stopWhen and its gRPC messages (-fuzztime $(FUZZTIME)).
	go test ./internal/controller/pipeline/ -run '^$$' -fuzz FuzzPipeline -fuzztime $(FUZZTIME) -fuzzminimizetime 2s
	go test ./internal/router/celjson/ -run '^$$' -fuzz FuzzDecodeJSON -fuzztime $(FUZZTIME) -fuzzminimizetime 2s
	go test ./internal/router/celjson/ -run '^$$' -fuzz FuzzJSONDecodeCost -fuzztime $(FUZZTIME) -fuzzminimizetime 2s
	go test ./internal/router/celjson/ -run '^$$' -fuzz FuzzJSONValue -fuzztime $(FUZZTIME) -fuzzminimizetime 2s
	go test ./internal/router/oip/ -run '^$$' -fuzz FuzzGRPCRequest -fuzztime $(FUZZTIME) -fuzzminimizetime 2s

# A duration for each target, starting from the corpus in internal/router/celjson/testdata/fuzz;
# a new input is minimized for 10s at most, so that the time goes to fuzzing.
FUZZTIME_LONG ?= 10m

.PHONY: test-fuzz-long
test-fuzz-long: ## Fuzz the router's JSON decoding, its cost bound and its reading by stopWhen for longer (-fuzztime $(FUZZTIME_LONG) each; not part of make test).
	go test ./internal/router/celjson/ -run '^$$' -fuzz '^FuzzDecodeJSON$$' -fuzztime $(FUZZTIME_LONG) -fuzzminimizetime 10s
	go test ./internal/router/celjson/ -run '^$$' -fuzz '^FuzzJSONDecodeCost$$' -fuzztime $(FUZZTIME_LONG) -fuzzminimizetime 10s
	go test ./internal/router/celjson/ -run '^$$' -fuzz '^FuzzJSONValue$$' -fuzztime $(FUZZTIME_LONG) -fuzzminimizetime 10s

BENCH_SIZES ?= 200,1000
BENCH_RUNS ?= 3
BENCH_BEFORE ?=

.PHONY: bench
bench: manifests envtest ## Measure convergence against the raw-write floor (operator out of process, webhooks served), where the CPU goes, writes and memory, and the cost of a node event; writes docs/performance.md. BENCH_BEFORE=<revision> measures that revision beside.
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) BENCH_OUTPUT=$(CURDIR)/docs/performance.md BENCH_SIZES=$(BENCH_SIZES) \
		BENCH_RUNS=$(BENCH_RUNS) BENCH_BEFORE=$(BENCH_BEFORE) \
		go test ./test/bench/operator/ -run TestBench -count=1 -timeout 120m -v

BENCH_SCALE_N ?= 10000
BENCH_SCALE_SIDE ?=

.PHONY: bench-scale
bench-scale: manifests envtest ## Measure the operator with 10,000 Pipelines against the floor, and a manager's start, resync and heap at that size; writes docs/performance-scale.md (one to three hours on 2 cores; BENCH_SCALE_SIDE=floor or operator measures one side).
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) BENCH_SCALE_OUTPUT=$(CURDIR)/docs/performance-scale.md BENCH_SCALE_N=$(BENCH_SCALE_N) BENCH_SCALE_SIDE=$(BENCH_SCALE_SIDE) \
		BENCH_OUTPUT=$(CURDIR)/docs/performance-scale.md BENCH_NODE_PIPELINES=$(BENCH_SCALE_N) \
		go test ./test/bench/operator/ -run 'TestBenchNodeEvents|TestBenchScale' -count=1 -timeout 240m -v

BENCH_ROUTER_ARGS ?=
BENCH_ROUTER_BEFORE ?=

.PHONY: bench-router
bench-router: ## Measure the router against a direct chain and KServe's router; writes docs/performance-router.md. BENCH_ROUTER_BEFORE=<revision> measures that revision's router beside.
	KSERVE_ROUTER=$(KSERVE_ROUTER) KSERVE_VERSION=$(KSERVE_VERSION) BENCH_ROUTER_BEFORE=$(BENCH_ROUTER_BEFORE) \
		BENCH_ROUTER_ARGS="$(BENCH_ROUTER_ARGS)" hack/bench-router.sh

##@ Local control plane

.PHONY: local-tools
local-tools: $(KUBE_BIN_DIR)/kube-apiserver $(KUBE_BIN_DIR)/kubectl $(ETCD_DIR)/etcd $(KWOK) $(KUSTOMIZE)

.PHONY: node-tools
node-tools: $(KUBE_BIN_DIR)/kubelet $(KUBE_BIN_DIR)/kube-proxy $(CONTAINERD_DIR)/containerd $(CNI_DIR)/bridge $(COREDNS) ## Build the real nodes' components (kubelet, kube-proxy, containerd, CNI plugins, CoreDNS) and install runc and nftables when root.
	@if [ "$$(id -u)" = 0 ]; then hack/realnodes-packages.sh; fi

.PHONY: local-images
local-images: $(LOCAL_IMAGES) ## Make the images of the real nodes without a container engine: the manager $(IMG) for $(IMAGE_ARCHS) (one multi-platform OCI image), the model server $(MODELSERVER_IMG) and the sandbox's pause.
# The manager image made here holds what the Dockerfile's does, built as it builds them, for
# every architecture of IMAGE_ARCHS: one multi-platform image (an OCI image layout).
IMAGE_ARCHS ?= amd64,arm64
$(IMAGE_DIR)/manager-local.tar: manifests generate
	hack/manager-image.sh $(VERSION) $(IMG) $(IMAGE_ARCHS) $@
$(IMAGE_DIR)/modelserver.tar: $(wildcard examples/modelserver/*.go examples/modelserver/models/*/*)
	CGO_ENABLED=0 go build -trimpath -o bin/modelserver ./examples/modelserver
	go run ./hack/ociimage -o $@ -tag $(MODELSERVER_IMG) -entrypoint /modelserver bin/modelserver=/modelserver examples/modelserver/models=/models
$(IMAGE_DIR)/pause.tar: hack/pause/main.go
	CGO_ENABLED=0 go build -trimpath -o bin/pause ./hack/pause
	go run ./hack/ociimage -o $@ -tag localhost/pause:local -entrypoint /pause bin/pause=/pause

# The flags that give localcluster up its real nodes (REAL_NODES= for none).
REAL_NODE_FLAGS = $(if $(REAL_NODES),-real-nodes $(REAL_NODES) -containerd $(CONTAINERD_DIR) -cni $(CNI_DIR) -coredns $(COREDNS) \
	-pause-image $(IMAGE_DIR)/pause.tar -images $(IMAGE_DIR)/manager-local.tar$(,)$(IMAGE_DIR)/modelserver.tar)
, := ,

.PHONY: local-up
local-up: local-tools $(if $(REAL_NODES),node-tools local-images) ## Start etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok nodes and the real nodes $(REAL_NODES) (as root) in the background.
	$(LOCALCLUSTER) up -dir $(LOCAL_DIR) -kube-bin $(KUBE_BIN_DIR) -etcd $(ETCD_DIR)/etcd -kwok $(KWOK) -kwok-version $(KWOK_VERSION) $(REAL_NODE_FLAGS)
	@echo "export KUBECONFIG=$(LOCAL_KUBECONFIG)"

.PHONY: local-down
local-down: ## Stop the local control plane (and an operator started by make demo).
	$(LOCALCLUSTER) down -dir $(LOCAL_DIR)

.PHONY: local-status
local-status: ## Show what runs of the local control plane.
	$(LOCALCLUSTER) status -dir $(LOCAL_DIR)

.PHONY: local-load
local-load: ## Import image archives IMAGES (space-separated) into every real node of the running local cluster (there is no registry).
	$(LOCALCLUSTER) load -dir $(LOCAL_DIR) -containerd $(CONTAINERD_DIR) $(IMAGES)

.PHONY: local-netns
local-netns: ## Print the network namespace of the local cluster's real nodes (enter it with nsenter --net=...).
	@$(LOCALCLUSTER) netns -dir $(LOCAL_DIR)

.PHONY: demo
demo: local-tools build $(if $(REAL_NODES),node-tools local-images build-installer) ## Start a local cluster with real nodes $(REAL_NODES) (as root; simulated otherwise), install the operator, run the seed Pipeline and, on real nodes, the iris Pipeline until it answers a request.
	KUBECTL=$(KUBECTL) KUSTOMIZE=$(KUSTOMIZE) LOCAL_DIR=$(LOCAL_DIR) MAKE=$(MAKE) RELATED_IMAGE_ROUTER=$${RELATED_IMAGE_ROUTER:-$(IMG)} \
	REAL_NODES=$(REAL_NODES) INSTALLER=$(abspath $(INSTALLER)) MODELSERVER_IMG=$(MODELSERVER_IMG) hack/demo.sh

.PHONY: demo-router
demo-router: ## Run the pipeline router in front of a fake face detector and recognizer on this machine (no cluster).
	go build -o bin/router ./cmd/router
	go run ./hack/demo-router -router bin/router

.PHONY: demo-down
demo-down: local-down ## Stop everything make demo started.

##@ Build

.PHONY: build
build: manifests generate fmt vet ## Build the manager and router binaries, stamped with $(VERSION).
	go build -ldflags "$(VERSION_LDFLAGS)" -o bin/manager ./cmd
	go build -ldflags "$(VERSION_LDFLAGS)" -o bin/router ./cmd/router

.PHONY: plugin
plugin: ## Build the kubectl plugin bin/kubectl-pipeline (`kubectl pipeline` once on PATH; docs/plugin.md).
	go build -ldflags "$(VERSION_LDFLAGS)" -o bin/kubectl-pipeline ./cmd/kubectl-pipeline

.PHONY: docker-build
docker-build: ## Build the manager image $(IMG) from the Dockerfile with buildah into $(IMAGE_DIR)/manager.tar.
	@hack/image-build.sh Dockerfile . $(IMG) $(IMAGE_DIR)/manager.tar \
		--build-arg TARGETOS=linux --build-arg TARGETARCH=$$(go env GOARCH) --build-arg VERSION=$(VERSION) || { \
		echo "docker-build: the Dockerfile's base images golang:1.26 (docker.io) and gcr.io/distroless/static:nonroot" >&2; \
		echo "must be pullable (registry access, or already in buildah's vfs storage) to build $(IMG)" >&2; exit 1; }

.PHONY: run
run: manifests generate fmt vet $(KUBECTL) ## Run the operator against $$KUBECONFIG, else the local control plane.
	@export RELATED_IMAGE_ROUTER=$${RELATED_IMAGE_ROUTER:-$(IMG)}; \
	if $(KUBECTL) version --request-timeout=3s >/dev/null 2>&1; then go run ./cmd --enable-webhooks=false --local-conversion; \
	elif [ -f $(LOCAL_KUBECONFIG) ] && KUBECONFIG=$(LOCAL_KUBECONFIG) $(KUBECTL) version --request-timeout=3s >/dev/null 2>&1; then \
		echo "no cluster reachable through KUBECONFIG: using the local control plane ($(LOCAL_KUBECONFIG))"; \
		KUBECONFIG=$(LOCAL_KUBECONFIG) go run ./cmd --enable-webhooks=false --local-conversion; \
	else echo "no cluster reachable through KUBECONFIG and no local control plane: run 'make local-up' first" >&2; exit 1; fi

##@ Deployment

# What make build-installer writes and make deploy applies: config/default (the manager makes its
# own webhook certificate, and a self-signed metrics one) or config/overlays/cert-manager
# (cert-manager issues and renews both).
DEPLOY_CONFIG ?= config/default
# The release manifest (dist/ is a build output).
INSTALLER ?= dist/install.yaml

.PHONY: build-installer
build-installer: $(KUSTOMIZE) ## Write the release manifest $(INSTALLER): everything $(DEPLOY_CONFIG) installs, the manager image $(IMG) (IMAGE_DIGESTS=true: by digest).
	IMAGE_DIGESTS=$(IMAGE_DIGESTS) hack/build-installer.sh $(KUSTOMIZE) $(IMG) $(DEPLOY_CONFIG) $(INSTALLER)
	@echo "wrote $(INSTALLER)"

.PHONY: install
install: $(KUSTOMIZE) $(DEPLOY_KUBECTL) ## Install the CRDs into the cluster of $$KUBECONFIG, and wait until they are served.
	$(KUSTOMIZE) build config/crd | $(DEPLOY_KUBECTL) apply --server-side -f -
	$(KUSTOMIZE) build config/crd | $(DEPLOY_KUBECTL) wait --for=condition=Established --timeout=60s -f -

.PHONY: uninstall
uninstall: $(KUSTOMIZE) $(DEPLOY_KUBECTL) ## Remove the CRDs from the cluster of $$KUBECONFIG.
	$(KUSTOMIZE) build config/crd | $(DEPLOY_KUBECTL) delete --ignore-not-found -f -

.PHONY: deploy
deploy: build-installer $(DEPLOY_KUBECTL) ## Deploy the operator to the cluster of $$KUBECONFIG: apply the release manifest $(INSTALLER) server-side.
	$(DEPLOY_KUBECTL) apply --server-side -f $(INSTALLER)

.PHONY: undeploy
undeploy: $(KUSTOMIZE) $(DEPLOY_KUBECTL) ## Remove the operator from the cluster of $$KUBECONFIG: delete what the release manifest names.
	IMAGE_DIGESTS=false hack/build-installer.sh $(KUSTOMIZE) $(IMG) $(DEPLOY_CONFIG) - | $(DEPLOY_KUBECTL) delete --ignore-not-found -f -

##@ Release

# Where make release writes the artifacts of $(VERSION).
RELEASE_DIR ?= dist/release/$(VERSION)

.PHONY: release
RELEASE_TOOLS = KUSTOMIZE=$(KUSTOMIZE) HELM=$(HELM) OPERATOR_SDK=$(OPERATOR_SDK) OPM=$(OPM) CATALOG_SERVER=$(CATALOG_SERVER) \
	BUNDLE_METADATA_OPTS="$(BUNDLE_METADATA_OPTS)"
release: manifests $(KUSTOMIZE) $(HELM) $(OPERATOR_SDK) $(OPM) $(CATALOG_SERVER_BINS) ## Write every artifact of release $(VERSION) into $(RELEASE_DIR): the manager image for linux/amd64 and linux/arm64 (one OCI image layout) and its digest, the OLM bundle and catalog images by that digest, install.yaml and the Helm chart naming it by that digest, the plugin's archives (linux, darwin, windows × amd64, arm64), its krew manifest with their sha256, SHA256SUMS.
	$(RELEASE_TOOLS) hack/release.sh $(VERSION) $(IMAGE_TAG_BASE) $(RELEASE_DIR)

.PHONY: test-release
test-release: $(KUSTOMIZE) $(HELM) $(OPERATOR_SDK) $(OPM) $(CATALOG_SERVER_BINS) ## Make a release of a test version and check that every artifact names its version and image digest, and each binary its platform.
	$(RELEASE_TOOLS) go test ./test/release/ -count=1 -timeout 20m

##@ Helm

.PHONY: helm-chart
helm-chart: manifests $(KUSTOMIZE) ## Write the Helm chart's templates (charts/pipeline-operator) from the kustomize builds of config/, its versions from $(VERSION).
	go run ./hack/helmchart -kustomize $(KUSTOMIZE) -config config -chart charts/pipeline-operator -version $(VERSION)

.PHONY: helm-package
helm-package: helm-chart $(HELM) ## Package the chart into dist/pipeline-operator-$(VERSION).tgz (helm install dist/pipeline-operator-$(VERSION).tgz).
	$(HELM) package charts/pipeline-operator -d dist

##@ OLM

.PHONY: bundle
bundle: manifests $(KUSTOMIZE) $(OPERATOR_SDK) ## Generate bundle/ and bundle.Dockerfile for $(IMG) at $(VERSION), then validate them (IMAGE_DIGESTS=true: $(IMG) by digest).
	$(OPERATOR_SDK) generate kustomize manifests -q
	IMAGE_DIGESTS=$(IMAGE_DIGESTS) hack/bundle.sh $(OPERATOR_SDK) $(KUSTOMIZE) $(IMG) $(VERSION) $(BUNDLE_METADATA_OPTS)

# The Dockerfiles whose FROM lines make pin-base-images pins.
DOCKERFILES := Dockerfile bundle.Dockerfile catalog.Dockerfile

.PHONY: pin-base-images
pin-base-images: ## Pin the base images of the Dockerfiles to the digests their tags point at now (asks their registries; at release).
	go run ./hack/imagedigest -pin $(DOCKERFILES)

.PHONY: bundle-build
bundle-build: ## Build the bundle image $(BUNDLE_IMG) from bundle/ with buildah into $(IMAGE_DIR)/bundle.tar (OCI archive).
	rm -rf $(IMAGE_DIR)/bundle-context && mkdir -p $(IMAGE_DIR)/bundle-context
	cp -r bundle bundle.Dockerfile $(IMAGE_DIR)/bundle-context/
	hack/image-build.sh bundle.Dockerfile $(IMAGE_DIR)/bundle-context $(BUNDLE_IMG) $(IMAGE_DIR)/bundle.tar

.PHONY: bundle-push
bundle-push: ## Push $(BUNDLE_IMG) to its registry (needs the registry and its credentials).
	buildah --storage-driver vfs push $(BUNDLE_IMG) docker://$(BUNDLE_IMG)

.PHONY: catalog
catalog: $(OPM) ## Add bundle/ to the file-based catalog in catalog/ (channel $(DEFAULT_CHANNEL)) and validate it.
	hack/catalog.sh $(OPM) bundle catalog pipeline-operator $(DEFAULT_CHANNEL) $(IMAGE_TAG_BASE)-bundle
	$(OPM) validate catalog

.PHONY: catalog-build
catalog-build: $(OPM) $(GRPC_HEALTH_PROBE) ## Build the catalog image $(CATALOG_IMG) (catalog/ served by opm) with buildah into $(IMAGE_DIR)/catalog.tar.
	rm -rf $(IMAGE_DIR)/catalog-context && mkdir -p $(IMAGE_DIR)/catalog-context/cache
	cp -r catalog catalog.Dockerfile $(OPM) $(GRPC_HEALTH_PROBE) $(IMAGE_DIR)/catalog-context/
	hack/image-build.sh catalog.Dockerfile $(IMAGE_DIR)/catalog-context $(CATALOG_IMG) $(IMAGE_DIR)/catalog.tar

.PHONY: test-images
test-images: bundle-build catalog-build ## Check the built bundle image (labels, files) and serve the catalog image as its user (needs root).
	export BUNDLE_DIR=$(CURDIR)/bundle PACKAGE=pipeline-operator CHANNEL=$(DEFAULT_CHANNEL) \
		BUNDLE_IMAGE_BASE=$(IMAGE_TAG_BASE)-bundle && hack/test-images.sh $(BUNDLE_IMG) $(CATALOG_IMG) sh -c '$(CATALOG_TEST)'

.PHONY: catalog-push
catalog-push: ## Push $(CATALOG_IMG) to its registry (needs the registry and its credentials).
	buildah --storage-driver vfs push $(CATALOG_IMG) docker://$(CATALOG_IMG)

##@ Tools

.PHONY: envtest
envtest: $(ENVTEST_ASSETS)/kube-apiserver $(ENVTEST_ASSETS)/etcd ## Build the envtest binaries (kube-apiserver, etcd).

$(ENVTEST_ASSETS)/kube-apiserver: $(KUBE_BIN_DIR)/kube-apiserver
	mkdir -p $(ENVTEST_ASSETS) && ln -sf $< $@
$(ENVTEST_ASSETS)/etcd: $(ETCD_DIR)/etcd
	mkdir -p $(ENVTEST_ASSETS) && ln -sf $< $@

$(KUBE_BIN_DIR)/kube-apiserver $(KUBE_BIN_DIR)/kube-controller-manager $(KUBE_BIN_DIR)/kube-scheduler $(KUBE_BIN_DIR)/kubectl:
	hack/build-tool.sh kube $(KUBE_BIN_DIR)
$(KUBECTL_ALONE):
	KUBE_COMMANDS=kubectl hack/build-tool.sh kube $(dir $@)
$(KUBE_BIN_DIR)/kubelet $(KUBE_BIN_DIR)/kube-proxy:
	KUBE_COMMANDS="kubelet kube-proxy" hack/build-tool.sh kube $(KUBE_BIN_DIR)
$(CONTAINERD_DIR)/containerd:
	hack/build-tool.sh containerd $(CONTAINERD_DIR)
$(CNI_DIR)/bridge:
	hack/build-tool.sh cni $(CNI_DIR)
$(COREDNS):
	hack/build-tool.sh coredns $(dir $(COREDNS))

$(ETCD_DIR)/etcd:
	hack/build-tool.sh etcd $(ETCD_DIR)
$(CODEGEN_DIR)/client-gen:
	hack/build-tool.sh codegen $(CODEGEN_DIR)
$(OPERATOR_SDK) $(SCORECARD_TEST) $(OPM) $(GRPC_HEALTH_PROBE):
	hack/build-tool.sh olm $(OLM_TOOLS_DIR)
$(CATALOG_SERVER_BINS):
	GOARCH=$(patsubst linux_%,%,$(notdir $(@D))) hack/build-tool.sh catalog-server $(@D)
$(OLM_DIR)/olm:
	hack/build-tool.sh lifecycle $(OLM_DIR)
$(KAL):
	hack/build-tool.sh kal $(dir $(KAL))

$(HELM):
	hack/build-tool.sh helm $(dir $(HELM))

$(PROMETHEUS):
	hack/build-tool.sh prometheus $(dir $(PROMETHEUS))

$(CONTROLLER_GEN):
	GOBIN=$(dir $@) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
$(KUSTOMIZE):
	GOBIN=$(dir $@) go install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)
$(KWOK):
	GOBIN=$(dir $@) go install sigs.k8s.io/kwok/cmd/kwok@$(KWOK_VERSION)
$(GOLANGCI_LINT):
	GOBIN=$(dir $@) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
