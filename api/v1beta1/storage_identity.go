package v1beta1

import (
	"encoding/json"

	apiequality "k8s.io/apimachinery/pkg/api/equality"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// The operator names a Pipeline's model volume and claim after the identity of its storage
// (pipelinev1.Pipeline.StorageIdentity). Before v1, it read the identity from v1beta1's
// modelStorage: a Pipeline made in v1beta1 whose storage v1 says otherwise (csi storage that
// names no driver, csiParameter entries or names its type does not read) has an identity the
// recipe, which reads v1, does not give. RecordStorageIdentity records that identity in
// pipelinev1.StorageIdentityAnnotation, so that the Pipeline keeps its names and its claim
// without the operator reading v1beta1. The conversion to v1 records it whenever it keeps the
// storage in the conversion data; the operator's storage version migration records it on the
// Pipelines stored as v1 before the annotation existed.

// RecordStorageIdentity records in pipelinev1.StorageIdentityAnnotation the identity of p's
// storage as v1beta1 said it, when p's conversion data (ConversionDataAnnotation) keeps its
// v1beta1 storage and that storage still converts to p's: the identity the operator gave the
// storage when it read v1beta1. An identity already recorded for p's current storage is kept. A
// Pipeline whose conversion data keeps storage that no longer converts to its own (changed in v1
// since) gets the recipe's identity recorded, unless one is recorded already, so that it is no
// longer pending (pipelinev1.Pipeline.StorageIdentityPending). It returns whether it changed p.
func RecordStorageIdentity(p *pipelinev1.Pipeline) bool {
	if _, ok := p.RecordedStorageIdentity(); ok {
		return false
	}
	if kept := keptStorage(p); kept != nil && apiequality.Semantic.DeepEqual(storageTo(*kept), p.Spec.ModelStorage) {
		return p.SetStorageIdentity(storageIdentity(*kept))
	}
	if p.StorageIdentityPending() {
		return p.SetStorageIdentity(pipelinev1.StorageIdentityOf(p.Spec.ModelStorage))
	}
	return false
}

// keptStorage is the v1beta1 storage the conversion data of p keeps; nil when it keeps none, or
// when the conversion data does not decode.
func keptStorage(p *pipelinev1.Pipeline) *ModelStorage {
	data, ok := p.Annotations[ConversionDataAnnotation]
	if !ok {
		return nil
	}
	var kept struct {
		ModelStorage *ModelStorage `json:"modelStorage"`
	}
	if json.Unmarshal([]byte(data), &kept) != nil {
		return nil
	}
	return kept.ModelStorage
}

// storageIdentity is the identity of v1beta1 storage m: its type, class, capacity, access modes,
// every csiParameter entry and its ModelStorageClass, as they are.
func storageIdentity(m ModelStorage) []string {
	return pipelinev1.StorageIdentityParts(string(m.EffectiveType()), m.StorageClassName, m.Capacity, m.AccessModes,
		m.CSIParameter, m.ModelStorageClassName)
}
