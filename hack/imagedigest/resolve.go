package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// resolver asks registries for the digests of images.
type resolver struct {
	// transport carries every request to a registry.
	transport http.RoundTripper
	// keychain gives the credentials for a registry.
	keychain authn.Keychain
}

// newResolver returns a resolver that uses the Docker configuration's credentials and speaks
// plain HTTP to loopback registries only.
func newResolver() *resolver {
	return &resolver{
		transport: loopbackOnlyHTTP{next: remote.DefaultTransport},
		keychain:  authn.DefaultKeychain,
	}
}

// digest returns the digest ("sha256:…") of the manifest that image names in its registry: the
// manifest its tag points at now, or the one its digest names (which must exist).
func (r *resolver) digest(ctx context.Context, image string) (string, error) {
	ref, err := name.ParseReference(image)
	if err != nil {
		return "", fmt.Errorf("image %q: %w", image, err)
	}
	opts := []remote.Option{
		remote.WithContext(ctx),
		remote.WithTransport(r.transport),
		remote.WithAuthFromKeychain(r.keychain),
	}
	desc, err := remote.Head(ref, opts...)
	if err == nil {
		return desc.Digest.String(), nil
	}
	// Some registries answer HEAD on manifests with an error but serve GET; an error of GET
	// also carries the registry's explanation, which a HEAD response has no body for.
	got, getErr := remote.Get(ref, opts...)
	if getErr != nil {
		return "", fmt.Errorf("image %s: cannot get its digest from registry %s: %w",
			image, ref.Context().RegistryStr(), getErr)
	}
	return got.Digest.String(), nil
}

// repository returns image without its tag and digest, spelled as given.
func repository(image string) string {
	repo, _, _ := strings.Cut(image, "@")
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	return repo
}

// withoutDigest returns image without its digest ("repo:tag@sha256:…" becomes "repo:tag").
func withoutDigest(image string) string {
	s, _, _ := strings.Cut(image, "@")
	return s
}

// loopbackOnlyHTTP refuses requests in plain HTTP to hosts other than loopback ones.
//
// go-containerregistry falls back to plain HTTP for registries on loopback, private (RFC 1918)
// and ".local" addresses; only loopback is safe from others on the network, who could answer
// with a digest of their choosing.
type loopbackOnlyHTTP struct {
	next http.RoundTripper
}

// RoundTrip sends req through the next transport unless it is plain HTTP to a host that is not
// a loopback one.
func (t loopbackOnlyHTTP) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" && !isLoopback(req.URL.Hostname()) {
		return nil, fmt.Errorf("%s %s: refused: registries are asked over HTTPS, plain HTTP only on loopback",
			req.Method, req.URL.Redacted())
	}
	return t.next.RoundTrip(req)
}

// isLoopback reports whether host is localhost or a loopback address.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
