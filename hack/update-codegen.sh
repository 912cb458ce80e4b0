#!/usr/bin/env bash
# update-codegen.sh CODEGEN_BIN_DIR — regenerates the typed Go client of the Pipeline API
# under pkg/client from api/v1beta1 and api/v1 (types marked +genclient), one clientset
# serving both versions:
#   pkg/client/applyconfiguration        apply configurations (server-side apply)
#   pkg/client/clientset/versioned       the typed clientset
#   pkg/client/listers                   listers
#   pkg/client/informers/externalversions shared informers
# CODEGEN_BIN_DIR holds client-gen, lister-gen, informer-gen and applyconfiguration-gen
# (hack/build-tool.sh codegen builds them). Every output directory is wholly generated and
# removed first, so types or files that disappear from the API do not linger.
set -euo pipefail
bin=$1
root="$(cd "$(dirname "$0")/.." && pwd -P)"
cd "$root"

module=$(go list -m)
out=pkg/client
out_pkg=$module/$out
header=hack/boilerplate.go.txt
# The API versions the client is generated for, as directories under the module.
versions=(api/v1beta1 api/v1)
inputs=()
for v in "${versions[@]}"; do
	inputs+=("$module/$v")
done

# Types of k8s.io/api the Pipeline API embeds (in either version), and where their apply
# configurations live.
core_types=(EnvVar ResourceRequirements SecurityContext Toleration)
externals=()
for t in "${core_types[@]}"; do
	externals+=("k8s.io/api/core/v1.$t:k8s.io/client-go/applyconfigurations/core/v1")
done
externals=$(IFS=,; echo "${externals[*]}")

rm -rf "$out/applyconfiguration" "$out/clientset" "$out/listers" "$out/informers"

"$bin/applyconfiguration-gen" \
	--go-header-file "$header" \
	--output-dir "$out/applyconfiguration" \
	--output-pkg "$out_pkg/applyconfiguration" \
	--external-applyconfigurations "$externals" \
	"${inputs[@]}"

"$bin/client-gen" \
	--go-header-file "$header" \
	--output-dir "$out/clientset" \
	--output-pkg "$out_pkg/clientset" \
	--clientset-name versioned \
	--apply-configuration-package "$out_pkg/applyconfiguration" \
	--input-base "$root" \
	--input "$(IFS=,; echo "${versions[*]}")"

"$bin/lister-gen" \
	--go-header-file "$header" \
	--output-dir "$out/listers" \
	--output-pkg "$out_pkg/listers" \
	"${inputs[@]}"

"$bin/informer-gen" \
	--go-header-file "$header" \
	--output-dir "$out/informers" \
	--output-pkg "$out_pkg/informers" \
	--versioned-clientset-package "$out_pkg/clientset/versioned" \
	--listers-package "$out_pkg/listers" \
	"${inputs[@]}"
