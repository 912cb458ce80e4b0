package apply

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestOwnsReplicas(t *testing.T) {
	entry := func(manager, subresource, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Subresource: subresource, FieldsV1: metav1.NewFieldsV1(fields)}
	}
	withReplicas := `{"f:spec":{"f:replicas":{},"f:template":{}}}`
	tests := []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    bool
	}{
		{name: "the operator's apply owns it", entries: []metav1.ManagedFieldsEntry{entry(FieldManager, "", withReplicas)}, want: true},
		{name: "the operator owns other fields", entries: []metav1.ManagedFieldsEntry{entry(FieldManager, "", `{"f:spec":{"f:template":{}}}`)}},
		{name: "the autoscaler owns it, through scale", entries: []metav1.ManagedFieldsEntry{
			entry(FieldManager, "", `{"f:spec":{"f:template":{}}}`), entry("kube-controller-manager", "scale", withReplicas)}},
		{name: "someone else owns it", entries: []metav1.ManagedFieldsEntry{entry("kubectl", "", withReplicas)}},
		{name: "no managed fields"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ownsReplicas(tt.entries, FieldManager); got != tt.want {
				t.Errorf("ownsReplicas = %v, want %v", got, tt.want)
			}
		})
	}
}
