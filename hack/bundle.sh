#!/usr/bin/env bash
# bundle.sh OPERATOR_SDK KUSTOMIZE IMAGE VERSION [GENERATE-BUNDLE-FLAGS...] — generates bundle/
# and bundle.Dockerfile of the project in the current directory (its config/ and PROJECT) for the
# manager image IMAGE at VERSION, then validates the bundle. `make bundle` runs it in the
# repository; the tests of hack/imagedigest run it in a copy.
#
# IMAGE_DIGESTS=true names the manager image by digest everywhere (hack/set-image.sh): the
# Deployment, RELATED_IMAGE_ROUTER, the CSV's containerImage annotation and relatedImages.
#
# The CSV's spec.minKubeVersion is the project's minimum Kubernetes release, the constant Minimum
# of config/kubeversion.
set -euo pipefail
operator_sdk=$1 kustomize=$2 image=$3 version=$4
shift 4
hack="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
csv=bundle/manifests/pipeline-operator.clusterserviceversion.yaml

min_kube="$(sed -n 's/^const Minimum = "\(.*\)"$/\1/p' config/kubeversion/kubeversion.go)"
if [ -z "$min_kube" ]; then
	echo "bundle.sh: no 'const Minimum = \"...\"' in config/kubeversion/kubeversion.go" >&2
	exit 1
fi
image="$("$hack/set-image.sh" "$kustomize" "$image" config/manager config/manifests)"
"$kustomize" build config/manifests | "$operator_sdk" generate bundle -q --overwrite --version "$version" "$@"
# The generator stamps the time of every run (the bundle must be a function of the sources),
# and lists in relatedImages only RELATED_IMAGE_* variables (the router, which runs from the
# manager's image): the manager image goes there too, for mirroring to disconnected registries.
sed -i -e '/^    createdAt: /d' -e "s|^  relatedImages:\$|&\\n  - image: $image\\n    name: manager|" \
	-e "s|^  minKubeVersion: .*|  minKubeVersion: $min_kube|" "$csv"
"$operator_sdk" bundle validate ./bundle
