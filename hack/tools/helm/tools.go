//go:build tools

// Package tools pins helm's command, which hack/build-tool.sh builds.
package tools

import _ "helm.sh/helm/v4/cmd/helm"
