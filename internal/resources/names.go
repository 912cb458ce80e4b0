// Package resources builds the children of a Pipeline as pure functions of its spec: their
// names and labels, the model PersistentVolume and claim, the Deployment, Service, autoscaler
// and disruption budget of each step, the Ingress, the router's configuration, Deployment and
// Service, and the NetworkPolicy of the steps. Nothing here reads or writes the cluster.
package resources

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// maxNameLength is the longest name the operator gives a child: a DNS label.
const maxNameLength = 63

// hashLength is the number of hex digits of a hash suffix.
const hashLength = 8

// childName joins parts with '-'. A name longer than a DNS label keeps its readable start and
// ends in a hash of the whole, so that distinct long names stay distinct.
func childName(parts ...string) string {
	name := strings.Join(parts, "-")
	if len(name) <= maxNameLength {
		return name
	}
	prefix := strings.TrimRight(name[:maxNameLength-hashLength-1], "-.")
	return prefix + "-" + shortHash(name)
}

// maxVolumePrefixLength is the longest readable start of a PersistentVolume's name (PVName).
const maxVolumePrefixLength = 63

// shortHash is the first hashLength hex digits of the SHA-256 of the parts.
func shortHash(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:hashLength]
}

// fullHash is the SHA-256 of the parts, all 64 hex digits. Each part is preceded by its length
// (8 bytes, big-endian): no two different lists of parts are hashed from the same bytes, whatever
// characters the parts hold.
func fullHash(parts ...string) string {
	h := sha256.New()
	var n [8]byte
	for _, p := range parts {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// StepName is the name of step i: every step has one (the conversion names a step the earlier
// API version left unnamed step-<1-based index>).
func StepName(p *pipelinev1.Pipeline, i int) string {
	return p.Spec.Steps[i].Name
}

// StepLabel names step i in messages: step <1-based index> (<name>).
func StepLabel(p *pipelinev1.Pipeline, i int) string {
	return fmt.Sprintf("step %d (%s)", i+1, StepName(p, i))
}

// StepObjectName names both the Deployment and the Service of step i.
func StepObjectName(p *pipelinev1.Pipeline, i int) string {
	return childName(p.Name, StepName(p, i))
}

// IngressName names the Ingress of a Pipeline: the Pipeline's own name, so that it stays the
// same when the steps are renamed or reordered.
func IngressName(p *pipelinev1.Pipeline) string {
	return childName(p.Name)
}

// storageKey identifies the storage spec of a Pipeline. A PersistentVolume's source and most of
// a claim's spec cannot change in place, so a different storage spec means new objects with
// new names, and the old ones are removed once the steps have moved over.
func storageKey(p *pipelinev1.Pipeline) string {
	return shortHash(storageIdentity(p)...)
}

// storageIdentity is what identifies the storage of p: its namespace and name, then the
// identity of its storage spec (pipelinev1.Pipeline.StorageIdentity: the one recorded for the
// current spec, else the recipe's).
func storageIdentity(p *pipelinev1.Pipeline) []string {
	return append([]string{p.Namespace, p.Name}, p.StorageIdentity()...)
}

// PVName names the model PersistentVolume of a new Pipeline, or of one whose storage changed.
// A PersistentVolume is cluster-scoped: its name must not be one another namespace's Pipeline
// can be made to want. It is the Pipeline's namespace and name (cut to maxVolumePrefixLength,
// to stay readable) followed by fullHash of storageIdentity: two Pipelines that differ in
// namespace, name or storage share it only through a SHA-256 collision. At most
// maxVolumePrefixLength+65 characters, a DNS subdomain. A volume an earlier version named
// otherwise is kept under its name (see PV).
func PVName(p *pipelinev1.Pipeline) string {
	prefix := p.Namespace + "-" + p.Name
	if len(prefix) > maxVolumePrefixLength {
		prefix = strings.TrimRight(prefix[:maxVolumePrefixLength], "-.")
	}
	return prefix + "-" + fullHash(storageIdentity(p)...)
}

// LegacyPVName is the name earlier versions gave the model PersistentVolume of p: namespace,
// name and the storage key joined by '-', cut to a DNS label. A claim bound to a volume of that
// name keeps it (see PV); no other name a claim may carry is taken over.
func LegacyPVName(p *pipelinev1.Pipeline) string {
	return childName(p.Namespace, p.Name, storageKey(p))
}

// ClaimName is the claim every step mounts: the user's for ExistingClaim storage
// (modelStorage.existingClaim.name), else the operator's.
func ClaimName(p *pipelinev1.Pipeline) string {
	if StorageType(p) == pipelinev1.ModelStorageTypeExistingClaim {
		if c := p.Spec.ModelStorage.ExistingClaim; c != nil {
			return c.Name
		}
		return ""
	}
	return childName(p.Name, "models", storageKey(p))
}
