package realnodes

import (
	"context"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/router/oip/inferencepb"
)

// routerGRPCPort is the port of the Open Inference Protocol's gRPC service on a router's Service.
const routerGRPCPort = "8081"

// The iris models as a graph on two real nodes, over gRPC and REST: the scaler (REST, node-a)
// feeds two classifiers at once, one serving only the protocol's gRPC service (node-b, probed by
// TCP), one REST (node-a); the answer takes the label of each. A gRPC client calls the router's
// gRPC port through the cluster's DNS and kube-proxy, and both branches name every flower.
func TestIrisGraphOverGRPCAndREST(t *testing.T) {
	ns := namespace(t, "iris-grpc")
	createModels(t, ns)
	p := irisPipeline(ns)
	p.Name = "iris-graph"
	scale, classify := p.Spec.Steps[0], p.Spec.Steps[1]
	classifyGRPC := *classify.DeepCopy()
	classifyGRPC.Name, classifyGRPC.Protocol, classifyGRPC.Args = "classify-grpc", pipelinev1.StepProtocolOpenInferenceGRPC, []string{"-grpc"}
	classifyREST := *classify.DeepCopy()
	classifyREST.Name, classifyREST.Location = "classify-rest", nodeA
	p.Spec.Steps = []pipelinev1.Step{scale, classifyGRPC, classifyREST}
	p.Spec.DataPath.Router.Outputs = []pipelinev1.PipelineTensorOutput{
		{Name: "label-grpc", Step: "classify-grpc", Tensor: "label"},
		{Name: "label-rest", Step: "classify-rest", Tensor: "label"},
	}
	p.Spec.DataPath.Router.Replicas = ptr.To(int32(1))
	if err := admin.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	stepStates(t, types.NamespacedName{Namespace: ns, Name: p.Name}, 3*time.Minute)

	dial := clusterDialer()
	conn, err := grpc.NewClient("passthrough:///"+net.JoinHostPort(fmt.Sprintf("%s-router.%s.svc.cluster.local", p.Name, ns), routerGRPCPort),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return dial(ctx, "tcp", addr) }))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	c := inferencepb.NewGRPCInferenceServiceClient(conn)
	flowers := []float32{5.1, 3.5, 1.4, 0.2, 6.0, 2.7, 4.5, 1.5, 6.9, 3.1, 5.8, 2.2}
	var res *inferencepb.ModelInferResponse
	// The Service's rules reach kube-proxy a moment after the Pipeline reports Running.
	eventually(t, 30*time.Second, "ModelInfer of "+p.Name, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err = c.ModelInfer(ctx, &inferencepb.ModelInferRequest{ModelName: p.Name,
			Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{{Name: "features", Datatype: "FP32", Shape: []int64{3, 4},
				Contents: &inferencepb.InferTensorContents{Fp32Contents: flowers}}}})
		return err
	})
	want := []string{"setosa", "versicolor", "virginica"}
	for _, name := range []string{"label-grpc", "label-rest"} {
		i := slices.IndexFunc(res.GetOutputs(), func(o *inferencepb.ModelInferResponse_InferOutputTensor) bool { return o.GetName() == name })
		if i < 0 {
			t.Fatalf("the answer has no %s: %v", name, res)
		}
		var labels []string
		for _, b := range res.GetOutputs()[i].GetContents().GetBytesContents() {
			labels = append(labels, string(b))
		}
		if !slices.Equal(labels, want) {
			t.Errorf("%s = %q, want %q", name, labels, want)
		}
	}
}
