package admission

import (
	"crypto/sha256"
	"encoding/json"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
)

// AccessCache keeps the SubjectAccessReviews that allowed a requester, for Validity, so that a
// writer creating many Pipelines with inline storage costs one review, not one per Pipeline, as
// the apiserver's own webhook authorizer caches its answers. Refusals are not kept: a requester
// just granted the right is allowed at once. A right revoked is still honoured for at most
// Validity. The zero value keeps nothing.
type AccessCache struct {
	// Validity is how long an allowing answer is reused; zero keeps nothing.
	Validity time.Duration
	// Max bounds the answers kept: when full, the expired ones go, then all of them.
	Max int
	// Now is the clock; nil is time.Now.
	Now func() time.Time

	mu      sync.Mutex
	allowed map[[sha256.Size]byte]time.Time // digest of the review spec → when the answer expires
}

// DefaultAccessValidity is how long the validating webhook reuses an answer that allowed a
// requester to create PersistentVolumes.
const DefaultAccessValidity = 10 * time.Second

// NewAccessCache keeps allowing answers for validity, at most 4096 of them.
func NewAccessCache(validity time.Duration) *AccessCache {
	return &AccessCache{Validity: validity, Max: 4096}
}

// accessKey is the digest of the whole spec of the review: user, uid, groups, extra and what is
// asked. A kept answer costs its digest, however large the requester's groups and extra.
func accessKey(spec *authorizationv1.SubjectAccessReviewSpec) ([sha256.Size]byte, bool) {
	data, err := json.Marshal(spec)
	return sha256.Sum256(data), err == nil
}

func (c *AccessCache) now() time.Time {
	if c != nil && c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// allows says whether an allowing answer to spec is kept and still valid.
func (c *AccessCache) allows(spec *authorizationv1.SubjectAccessReviewSpec) bool {
	if c == nil || c.Validity <= 0 {
		return false
	}
	key, ok := accessKey(spec)
	if !ok {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	expires, found := c.allowed[key]
	return found && c.now().Before(expires)
}

// allow keeps the allowing answer to spec, asked at asked, until Validity after it.
func (c *AccessCache) allow(spec *authorizationv1.SubjectAccessReviewSpec, asked time.Time) {
	if c == nil || c.Validity <= 0 {
		return
	}
	key, ok := accessKey(spec)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.allowed == nil {
		c.allowed = map[[sha256.Size]byte]time.Time{}
	}
	if len(c.allowed) >= max(1, c.Max) {
		now := c.now()
		for k, exp := range c.allowed {
			if !now.Before(exp) {
				delete(c.allowed, k)
			}
		}
		if len(c.allowed) >= max(1, c.Max) {
			clear(c.allowed)
		}
	}
	c.allowed[key] = asked.Add(c.Validity)
}
