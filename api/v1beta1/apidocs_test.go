package v1beta1_test

import (
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

const apiDocsFile = "../../docs/api.md"

// The headings of docs/api.md that start its parts: the Pipeline's v1 (up to v1beta1Section),
// the Pipeline's v1beta1 (up to classSection), and the ModelStorageClass (to the end).
const (
	v1Section      = "\n## v1 reference\n"
	v1beta1Section = "\n## v1beta1 reference\n"
	classSection   = "\n## ModelStorageClass\n"
)

// between is the part of docs after the line start up to the line end, and the number in docs
// of the part's first line; "" when either line is missing or they are out of order. An empty
// end means the end of docs.
func between(docs, start, end string) (part string, firstLine int) {
	i := strings.Index(docs, start)
	if i < 0 {
		return "", 0
	}
	after := docs[i+len(start):]
	firstLine = strings.Count(docs[:i+len(start)], "\n") + 1
	if end == "" {
		return after, firstLine
	}
	part, _, ok := strings.Cut(after, end)
	if !ok {
		return "", 0
	}
	return part, firstLine
}

// pipelineEmbedded are the fields of a Pipeline whose type is a Kubernetes type embedded in it,
// in both versions.
var pipelineEmbedded = map[string]bool{
	"spec.steps[].resources":       true,
	"spec.steps[].env":             true,
	"spec.steps[].nodeSelector":    true,
	"spec.steps[].tolerations":     true,
	"spec.steps[].securityContext": true,
	"status.conditions":            true,
}

// v1Embedded are the fields of a v1 Pipeline whose type is a Kubernetes type embedded in it.
var v1Embedded = with(pipelineEmbedded, "spec.dataPath.router.resources", "spec.steps[].readinessProbe",
	"spec.steps[].livenessProbe", "spec.steps[].startupProbe", "spec.steps[].imagePullSecrets")

// with is m and the keys more.
func with(m map[string]bool, more ...string) map[string]bool {
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	for _, k := range more {
		out[k] = true
	}
	return out
}

// documentedCRDs are the CRD versions docs/api.md documents: the file of the CRD, the version,
// the headings that start and end the part of the docs about that version, and the fields whose
// type is a Kubernetes type embedded in it (docs/api.md documents the field itself, not its
// sub-fields).
var documentedCRDs = []struct {
	kind, version string
	crdFile       string
	start, end    string
	embedded      map[string]bool
}{{
	kind:     "Pipeline",
	version:  "v1",
	crdFile:  "../../config/crd/bases/distri-infer.ndsl.cn_pipelines.yaml",
	start:    v1Section,
	end:      v1beta1Section,
	embedded: v1Embedded,
}, {
	kind:     "Pipeline",
	version:  "v1beta1",
	crdFile:  "../../config/crd/bases/distri-infer.ndsl.cn_pipelines.yaml",
	start:    v1beta1Section,
	end:      classSection,
	embedded: with(pipelineEmbedded, "spec.router.resources"),
}, {
	kind:    "ModelStorageClass",
	version: "v1beta1",
	crdFile: "../../config/crd/bases/distri-infer.ndsl.cn_modelstorageclasses.yaml",
	start:   classSection,
	embedded: map[string]bool{
		"spec.namespaceSelector": true,
	},
}}

// docPath is a backquoted spec or status field path.
var docPath = regexp.MustCompile("`((?:spec|status)\\.[^`]*)`")

// TestAPIDocsMatchCRD checks that docs/api.md documents every field under spec and status of
// each version of the Pipeline CRD (v1 and v1beta1) and of the ModelStorageClass CRD, each in
// its own part, in the first column of a field table, and that the field tables of each part
// name no field its CRD version does not have.
func TestAPIDocsMatchCRD(t *testing.T) {
	data, err := os.ReadFile(apiDocsFile)
	if err != nil {
		t.Fatalf("read %s: %v", apiDocsFile, err)
	}
	for _, c := range documentedCRDs {
		t.Run(c.kind+"/"+c.version, func(t *testing.T) {
			docs, firstLine := between(string(data), c.start, c.end)
			if docs == "" {
				t.Fatalf("%s has no part about %s %s: from %q to %q", apiDocsFile, c.kind, c.version,
					strings.TrimSpace(c.start), strings.TrimSpace(c.end))
			}
			checkDocs(t, docs, firstLine, c.crdFile, c.version, c.embedded)
		})
	}
}

// checkDocs compares the fields of version of the CRD in crdFile with the part docs of
// docs/api.md, which starts at line firstLine of the file. A field counts as documented when
// its path is in the first column of a table row of that part: a mention in prose, or in a
// description that refers to the same field of the other version, is not its documentation.
func checkDocs(t *testing.T, docs string, firstLine int, crdFile, version string, embeddedTypeFields map[string]bool) {
	t.Helper()
	crdPaths := crdFieldPaths(t, crdFile, version, embeddedTypeFields)
	for p := range embeddedTypeFields {
		if !crdPaths[p] {
			t.Errorf("%s is listed as an embedded core type but is not a field of %s", p, version)
		}
	}
	documented := documentedPaths(docs)

	var missing []string
	for p := range crdPaths {
		if _, ok := documented[p]; !ok {
			missing = append(missing, p)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("%s does not document these %s CRD fields (as `path` in the first column of a field table of its part):\n  %s",
			apiDocsFile, version, strings.Join(missing, "\n  "))
	}

	var unknown []string
	for p, line := range documented {
		if !crdPaths[p] {
			unknown = append(unknown, p+" (line "+strconv.Itoa(firstLine+line-1)+")")
		}
	}
	sort.Strings(unknown)
	if len(unknown) > 0 {
		t.Errorf("%s documents fields that %s of the CRD does not have:\n  %s", apiDocsFile, version, strings.Join(unknown, "\n  "))
	}
}

// crdFieldPaths reads the CRD and returns the paths of every field under spec and status of its
// version.
func crdFieldPaths(t *testing.T, crdFile, version string, embeddedTypeFields map[string]bool) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(crdFile)
	if err != nil {
		t.Fatalf("read %s: %v", crdFile, err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		t.Fatalf("decode %s: %v", crdFile, err)
	}
	var root *apiextensionsv1.JSONSchemaProps
	for _, v := range crd.Spec.Versions {
		if v.Name == version && v.Schema != nil {
			root = v.Schema.OpenAPIV3Schema
		}
	}
	if root == nil {
		t.Fatalf("%s has no %s openAPIV3Schema", crdFile, version)
	}
	paths := map[string]bool{}
	for _, top := range []string{"spec", "status"} {
		s, ok := root.Properties[top]
		if !ok {
			t.Fatalf("%s: the %s schema has no %s", crdFile, version, top)
		}
		walkSchema(top, &s, paths, embeddedTypeFields)
	}
	return paths
}

// walkSchema adds the path of every property of s, below prefix, to paths. It descends into
// objects and into lists of objects (as prefix.list[].field), but not into maps (documented as
// a whole), fields that preserve unknown fields, or embedded core types.
func walkSchema(prefix string, s *apiextensionsv1.JSONSchemaProps, paths, embeddedTypeFields map[string]bool) {
	for name, prop := range s.Properties {
		p := prefix + "." + name
		paths[p] = true
		if embeddedTypeFields[p] || (prop.XPreserveUnknownFields != nil && *prop.XPreserveUnknownFields) {
			continue
		}
		switch {
		case len(prop.Properties) > 0:
			walkSchema(p, &prop, paths, embeddedTypeFields)
		case prop.Items != nil && prop.Items.Schema != nil && len(prop.Items.Schema.Properties) > 0:
			walkSchema(p+"[]", prop.Items.Schema, paths, embeddedTypeFields)
		}
	}
}

// documentedPaths returns the spec and status paths named in the first column of the tables
// of docs, by the line they are on.
func documentedPaths(docs string) map[string]int {
	out := map[string]int{}
	for n, line := range strings.Split(docs, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.TrimPrefix(line, "|"), "|")
		for _, m := range docPath.FindAllStringSubmatch(cells[0], -1) {
			out[m[1]] = n + 1
		}
	}
	return out
}
