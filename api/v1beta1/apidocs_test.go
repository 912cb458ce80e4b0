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

// classSection starts the part of docs/api.md that documents the ModelStorageClass; what comes
// before it documents the Pipeline.
const classSection = "\n## ModelStorageClass\n"

// documentedCRDs are the CRDs docs/api.md documents: the file of each, the part of the docs
// about it, and the fields whose type is a Kubernetes type embedded in it (docs/api.md documents
// the field itself, not its sub-fields).
var documentedCRDs = []struct {
	kind     string
	crdFile  string
	section  func(docs string) string
	embedded map[string]bool
}{{
	kind:    "Pipeline",
	crdFile: "../../config/crd/bases/distri-infer.ndsl.cn_pipelines.yaml",
	section: func(docs string) string { before, _, _ := strings.Cut(docs, classSection); return before },
	embedded: map[string]bool{
		"spec.steps[].resources":       true,
		"spec.steps[].env":             true,
		"spec.steps[].nodeSelector":    true,
		"spec.steps[].tolerations":     true,
		"spec.steps[].securityContext": true,
		"spec.router.resources":        true,
		"status.conditions":            true,
	},
}, {
	kind:    "ModelStorageClass",
	crdFile: "../../config/crd/bases/distri-infer.ndsl.cn_modelstorageclasses.yaml",
	section: func(docs string) string { _, after, _ := strings.Cut(docs, classSection); return after },
	embedded: map[string]bool{
		"spec.namespaceSelector": true,
	},
}}

// docPath is a backquoted spec or status field path.
var docPath = regexp.MustCompile("`((?:spec|status)\\.[^`]*)`")

// TestAPIDocsMatchCRD checks that docs/api.md documents every field of the Pipeline and
// ModelStorageClass CRDs under spec and status, each in its own part, and that the field tables
// of each part name no field its CRD does not have.
func TestAPIDocsMatchCRD(t *testing.T) {
	data, err := os.ReadFile(apiDocsFile)
	if err != nil {
		t.Fatalf("read %s: %v", apiDocsFile, err)
	}
	for _, c := range documentedCRDs {
		t.Run(c.kind, func(t *testing.T) {
			docs := c.section(string(data))
			if docs == "" {
				t.Fatalf("%s has no part about %s (%q)", apiDocsFile, c.kind, strings.TrimSpace(classSection))
			}
			checkDocs(t, docs, c.crdFile, c.embedded)
		})
	}
}

// checkDocs compares the fields of the CRD in crdFile with the part docs of docs/api.md.
func checkDocs(t *testing.T, docs, crdFile string, embeddedTypeFields map[string]bool) {
	t.Helper()
	crdPaths := crdFieldPaths(t, crdFile, embeddedTypeFields)
	for p := range embeddedTypeFields {
		if !crdPaths[p] {
			t.Errorf("%s is listed as an embedded core type but is not a field of the CRD", p)
		}
	}

	var missing []string
	for p := range crdPaths {
		if !strings.Contains(docs, "`"+p+"`") {
			missing = append(missing, p)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("%s does not document these CRD fields (as `path`):\n  %s", apiDocsFile, strings.Join(missing, "\n  "))
	}

	var unknown []string
	for p, line := range documentedPaths(docs) {
		if !crdPaths[p] {
			unknown = append(unknown, p+" (line "+strconv.Itoa(line)+")")
		}
	}
	sort.Strings(unknown)
	if len(unknown) > 0 {
		t.Errorf("%s documents fields the CRD does not have:\n  %s", apiDocsFile, strings.Join(unknown, "\n  "))
	}
}

// crdFieldPaths reads the CRD and returns the paths of every field under spec and status.
func crdFieldPaths(t *testing.T, crdFile string, embeddedTypeFields map[string]bool) map[string]bool {
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
		if v.Name == "v1beta1" && v.Schema != nil {
			root = v.Schema.OpenAPIV3Schema
		}
	}
	if root == nil {
		t.Fatalf("%s has no v1beta1 openAPIV3Schema", crdFile)
	}
	paths := map[string]bool{}
	for _, top := range []string{"spec", "status"} {
		s, ok := root.Properties[top]
		if !ok {
			t.Fatalf("%s: the v1beta1 schema has no %s", crdFile, top)
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
