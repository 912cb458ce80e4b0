//go:build tools

// Package tools pins KServe's InferenceGraph router, which make bench-router runs side by
// side with the pipeline router.
package tools

import (
	_ "github.com/kserve/kserve/cmd/router"
)
