// Builds etcd from the Go module proxy (its own go.mod replaces sibling modules by path,
// which `go install` refuses).
module github.com/ndsl-cn/pipeline-operator/hack/tools/etcd

go 1.26.0

require go.etcd.io/etcd/server/v3 v3.7.3
