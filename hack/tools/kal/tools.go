//go:build tools

// Package tools pins the golangci-lint build with kube-api-linter that make lint runs over api/v1.
package tools

import (
	_ "sigs.k8s.io/kube-api-linter/cmd/golangci-lint-kube-api-linter"
)
