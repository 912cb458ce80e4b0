#!/usr/bin/env bash
# protogen.sh — generates internal/router/oip/inferencepb, the Go messages and gRPC service of
# the Open Inference Protocol, from the protocol's published .proto (KServe's
# docs/predict-api/v2/grpc_predict_v2.proto, in the module hack/tools/kserve pins) with the
# standard tools: protoc (Debian's protobuf-compiler), protoc-gen-go (the google.golang.org/protobuf
# of go.mod) and protoc-gen-go-grpc. The tools are cached under CACHE_DIR, keyed by version.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pipeline-operator}"
grpc_gen_version=v1.6.0
protobuf_version=$(cd "$root" && go list -m -f '{{.Version}}' google.golang.org/protobuf)
kserve_version=$(awk '$1=="require" && $2=="github.com/kserve/kserve" {print $3}' "$root/hack/tools/kserve/go.mod")
deb_version=3.21.12-3

protoc_dir="$cache/protoc-$deb_version"
if [ ! -x "$protoc_dir/usr/bin/protoc" ]; then
	tmp="$(mktemp -d)"
	trap 'rm -rf "$tmp"' EXIT
	(cd "$tmp" && apt-get download -q "protobuf-compiler=$deb_version" "libprotoc32=$deb_version" "libprotobuf32=$deb_version" >/dev/null 2>&1) ||
		{ apt-get update -q >/dev/null && (cd "$tmp" && apt-get download -q "protobuf-compiler=$deb_version" "libprotoc32=$deb_version" "libprotobuf32=$deb_version" >/dev/null); }
	mkdir -p "$tmp/root"
	for deb in "$tmp"/*.deb; do dpkg-deb -x "$deb" "$tmp/root"; done
	rm -rf "$protoc_dir" && mkdir -p "$(dirname "$protoc_dir")" && mv "$tmp/root" "$protoc_dir"
fi
gen_dir="$cache/protoc-gen-go-$protobuf_version-grpc-$grpc_gen_version"
if [ ! -x "$gen_dir/protoc-gen-go-grpc" ]; then
	(cd "$root" && GOBIN="$gen_dir" go install google.golang.org/protobuf/cmd/protoc-gen-go)
	GOBIN="$gen_dir" GOFLAGS=-mod=mod go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$grpc_gen_version"
fi

src=$(cd "$root/hack/tools/kserve" && go mod download -json "github.com/kserve/kserve@$kserve_version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
proto=grpc_predict_v2.proto
pkg=github.com/ndsl-cn/pipeline-operator/internal/router/oip/inferencepb
out="$root/internal/router/oip/inferencepb"
mkdir -p "$out"
rm -f "$out"/*.pb.go
LD_LIBRARY_PATH="$protoc_dir/usr/lib/x86_64-linux-gnu" PATH="$gen_dir:$PATH" "$protoc_dir/usr/bin/protoc" \
	-I "$src/docs/predict-api/v2" \
	--go_out="$out" --go_opt=paths=source_relative --go_opt="M$proto=$pkg;inferencepb" \
	--go-grpc_out="$out" --go-grpc_opt=paths=source_relative --go-grpc_opt="M$proto=$pkg;inferencepb" \
	"$proto"
