//go:build tools

// Package tools pins the commands hack/build-tool.sh builds from this module: OLM's
// olm-operator (cmd/olm) and catalog-operator (cmd/catalog).
package tools

import (
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/catalog"
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/olm"
)
