package plugin

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"

	"github.com/ndsl-cn/pipeline-operator/pkg/client/clientset/versioned"
	clientv1 "github.com/ndsl-cn/pipeline-operator/pkg/client/clientset/versioned/typed/api/v1"
)

// resource is the Pipeline's resource name.
const resource = "pipelines"

// Server is the cluster the plugin talks to, and the version of the Pipeline it speaks there.
type Server struct {
	// Pipelines is the generated clientset of the Pipeline API (pkg/client): its client of
	// Version reads, watches and patches Pipelines.
	Pipelines versioned.Interface
	Core      kubernetes.Interface
	// Version is the API version Pipelines are read and written in: v1 when the cluster serves
	// it, else v1beta1.
	Version string
	// Served are the versions of the Pipeline the cluster serves, preferred first.
	Served []string
}

// Connect makes the clients of flags' cluster and asks its discovery which versions of the
// Pipeline it serves. Discovery is asked afresh (not from kubectl's discovery cache), so that an
// upgrade of the operator is seen at once.
func Connect(flags *genericclioptions.ConfigFlags) (*Server, error) {
	cfg, err := flags.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	served, err := servedVersions(disco)
	if err != nil {
		return nil, err
	}
	version, err := ChooseVersion(served)
	if err != nil {
		return nil, err
	}
	pipelines, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Server{Pipelines: pipelines, Core: core, Version: version, Served: served}, nil
}

// servedVersions are the versions of the group that serve pipelines, the preferred one first.
func servedVersions(disco discovery.DiscoveryInterface) ([]string, error) {
	groups, err := disco.ServerGroups()
	if err != nil {
		return nil, fmt.Errorf("discover the cluster's API groups: %w", err)
	}
	var group *metav1.APIGroup
	for i := range groups.Groups {
		if groups.Groups[i].Name == Group {
			group = &groups.Groups[i]
		}
	}
	if group == nil {
		return nil, fmt.Errorf("the cluster serves no %s API: is pipeline-operator installed (its CustomResourceDefinition pipelines.%s)?", Group, Group)
	}
	versions := []string{group.PreferredVersion.Version}
	for _, v := range group.Versions {
		if !slices.Contains(versions, v.Version) {
			versions = append(versions, v.Version)
		}
	}
	var served []string
	for _, v := range versions {
		list, err := disco.ServerResourcesForGroupVersion(Group + "/" + v)
		if err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("discover the resources of %s/%s: %w", Group, v, err)
		}
		if slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == resource }) {
			served = append(served, v)
		}
	}
	if len(served) == 0 {
		return nil, fmt.Errorf("the cluster serves the %s API but no %s in it", Group, resource)
	}
	return served, nil
}

// ChooseVersion is the version the plugin speaks to a cluster that serves the versions served
// (preferred first): v1 when it is served (the version every operator since 0.2.0 stores), else
// v1beta1 (an operator 0.1.0).
func ChooseVersion(served []string) (string, error) {
	for _, v := range []string{VersionV1, VersionV1beta1} {
		if slices.Contains(served, v) {
			return v, nil
		}
	}
	return "", fmt.Errorf("the cluster serves pipelines.%s in %s, and this plugin knows %s and %s: use a newer kubectl-pipeline",
		Group, strings.Join(served, ", "), VersionV1, VersionV1beta1)
}

// Pipeline reads the Pipeline namespace/name in the server's version and summarises it, with an
// error that says so when it does not exist.
func (s *Server) Pipeline(ctx context.Context, namespace, name string) (Pipeline, error) {
	c, err := s.client(namespace)
	if err != nil {
		return Pipeline{}, err
	}
	return c.get(ctx, name)
}

// List reads the Pipelines of namespace ("" for every namespace), summarised and sorted by
// namespace and name.
func (s *Server) List(ctx context.Context, namespace string) ([]Pipeline, error) {
	c, err := s.client(namespace)
	if err != nil {
		return nil, err
	}
	items, _, err := c.list(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(items, func(a, b Pipeline) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return items, nil
}

// pipelineClient reads, watches and merge-patches the Pipelines of one namespace ("" for every
// namespace) in one version of the API, through that version's generated client, and
// summarises what it reads.
type pipelineClient interface {
	// get is the Pipeline name, with an error that says so when it does not exist.
	get(ctx context.Context, name string) (Pipeline, error)
	// list is the Pipelines that opts select, and the resource version of the list.
	list(ctx context.Context, opts metav1.ListOptions) (items []Pipeline, resourceVersion string, err error)
	watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	patch(ctx context.Context, name string, mergePatch []byte) error
}

// client is the pipelineClient of namespace in the server's version.
func (s *Server) client(namespace string) (pipelineClient, error) {
	switch s.Version {
	case VersionV1:
		return v1Client{s.Pipelines.DistriInferV1().Pipelines(namespace), namespace}, nil
	case VersionV1beta1:
		return s.v1beta1Client(namespace), nil
	}
	return nil, fmt.Errorf("version %q is neither %s nor %s", s.Version, VersionV1, VersionV1beta1)
}

// v1Client reads Pipelines in v1.
type v1Client struct {
	c         clientv1.PipelineInterface
	namespace string
}

func (c v1Client) get(ctx context.Context, name string) (Pipeline, error) {
	p, err := c.c.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return Pipeline{}, getError(err, c.namespace, name)
	}
	return FromV1(p), nil
}

func (c v1Client) list(ctx context.Context, opts metav1.ListOptions) ([]Pipeline, string, error) {
	list, err := c.c.List(ctx, opts)
	if err != nil {
		return nil, "", fmt.Errorf("list pipelines: %w", err)
	}
	items := make([]Pipeline, 0, len(list.Items))
	for i := range list.Items {
		items = append(items, FromV1(&list.Items[i]))
	}
	return items, list.ResourceVersion, nil
}

func (c v1Client) watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return c.c.Watch(ctx, opts)
}

func (c v1Client) patch(ctx context.Context, name string, mergePatch []byte) error {
	_, err := c.c.Patch(ctx, name, types.MergePatchType, mergePatch, metav1.PatchOptions{})
	return err
}

// getError is err, of reading the Pipeline namespace/name, as the plugin says it.
func getError(err error, namespace, name string) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("pipeline %q not found in namespace %q", name, namespace)
	}
	return fmt.Errorf("get pipeline %s/%s: %w", namespace, name, err)
}

// watch calls show(true), then show(false) each time a Pipeline of namespace ("" for every
// namespace), or only the one called name when name is not empty, is added, changed or deleted,
// until ctx ends (then it returns nil). A watch the server closes is opened again; what changed
// meanwhile is shown then.
func (s *Server) watch(ctx context.Context, namespace, name string, show func(first bool) error) error {
	opts := metav1.ListOptions{}
	if name != "" {
		opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	}
	c, err := s.client(namespace)
	if err != nil {
		return err
	}
	for first := true; ; first = false {
		// The version the drawing starts from: what changes after it is watched for.
		_, resourceVersion, err := c.list(ctx, opts)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("list pipelines: %w", err)
		}
		if err := show(first); err != nil {
			return err
		}
		watchOpts := opts
		watchOpts.ResourceVersion = resourceVersion
		w, err := c.watch(ctx, watchOpts)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watch pipelines: %w", err)
		}
		err = s.showChanges(ctx, w, show)
		w.Stop()
		if err != nil || ctx.Err() != nil {
			return err
		}
		// A server that keeps closing the watch is asked again once a second, not at once.
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// showChanges calls show(false) for each change w reports, until ctx ends, w closes, or w
// reports an error (the version it started from is too old: the caller starts again).
func (*Server) showChanges(ctx context.Context, w watch.Interface, show func(first bool) error) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				return nil
			}
			if ev.Type == watch.Bookmark {
				continue
			}
			if err := show(false); err != nil {
				return err
			}
		}
	}
}
