package webhookserver

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/netutil"
	"golang.org/x/sync/semaphore"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/ndsl-cn/pipeline-operator/internal/webhookserver/jsonshape"
)

// ConversionPath is where controller-runtime serves the conversion webhook.
const ConversionPath = "/convert"

// Limits bound what a caller of the webhook server can make the manager hold. The port is
// reachable by whatever the network lets through (docs/security.md): none of them trusts the
// caller to be the kube-apiserver.
type Limits struct {
	// MaxAdmissionBytes bounds the body of an AdmissionReview. The kube-apiserver sends at most
	// an object and its old version, each within etcd's 1.5 MiB.
	MaxAdmissionBytes int64
	// MaxConversionBytes bounds the body of a ConversionReview. The kube-apiserver converts a
	// list read in a version other than the stored one in one review: this bounds the largest
	// v1beta1 list that can be read at once.
	MaxConversionBytes int64
	// MaxBodyBytes bounds the request bodies held at once, over all requests. Bytes are counted
	// as they arrive, so a client that sends slowly holds what it sent, not what it announced.
	MaxBodyBytes int64
	// MaxInFlight bounds the requests handled at once once their bodies are read; the others
	// wait their turn until their caller gives up.
	MaxInFlight int
	// ReadHeaderTimeout bounds the TLS handshake and the request's headers; ReadTimeout the
	// whole request, body included; WriteTimeout the time from the headers to the answer.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout time.Duration
	// IdleTimeout closes a kept-alive connection that carries no request.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds the request line and headers.
	MaxHeaderBytes int
	// MaxConnections bounds the connections open at once; the others wait in the kernel's
	// queue until one closes, costing the manager nothing.
	MaxConnections int
	// Review bounds what a review may hold beyond what the served resource's schema bounds
	// (its metadata, the review's own fields): nesting, items, members and, for an
	// AdmissionReview, values.
	Review jsonshape.Limits
	// ValueCost is what each value of an AdmissionReview holds of the body budget while it is
	// handled, beside its bytes: what it costs decoded, defaulted and compared.
	ValueCost int64
	// MaxConversionObjects bounds the objects of a ConversionReview: what each costs converted
	// does not depend on its bytes.
	MaxConversionObjects int
	// MaxUserInfoBytes bounds the requester an AdmissionReview names (userInfo).
	MaxUserInfoBytes int64
}

// DefaultLimits fit a manager with 256 MiB of memory: the bodies it holds stay a fraction of it,
// and every bound is far above what the kube-apiserver needs (it waits at most 30 s for a
// webhook, and sends a body at once).
func DefaultLimits() Limits {
	return Limits{
		MaxAdmissionBytes:  7 << 20,
		MaxConversionBytes: 16 << 20,
		MaxBodyBytes:       24 << 20,
		MaxInFlight:        32,
		ReadHeaderTimeout:  10 * time.Second,
		ReadTimeout:        20 * time.Second,
		WriteTimeout:       45 * time.Second,
		IdleTimeout:        90 * time.Second,
		MaxHeaderBytes:     64 << 10,
		MaxConnections:     256,
		// A Pipeline nests 8 deep and a review adds 2; managedFields mirror the object.
		// Tenants' objects carry hundreds of labels.
		Review:               jsonshape.Limits{MaxDepth: 32, MaxItems: 1024, MaxProperties: 4096, MaxValues: 64 << 10},
		ValueCost:            256,
		MaxConversionObjects: 4096,
		MaxUserInfoBytes:     64 << 10,
	}
}

// Refusal reasons, the reason label of MetricWebhookRefused.
const (
	RefusedTooLarge = "too_large"
	RefusedBusy     = "busy"
	RefusedSlow     = "slow"
	RefusedShape    = "shape"
	// RefusedUnauthenticated is an admission request without the client certificate
	// RequireClients asks for.
	RefusedUnauthenticated = "unauthenticated"
)

// MetricWebhookRefused counts the requests the webhook server refused before any webhook saw
// them, by reason.
const MetricWebhookRefused = "pipeline_operator_webhook_refused_total"

// MetricWebhookCertificateExpiry is when the certificate the webhook port serves expires.
const MetricWebhookCertificateExpiry = "pipeline_operator_webhook_certificate_expiry_timestamp_seconds"

var certificateExpiryDesc = prometheus.NewDesc(MetricWebhookCertificateExpiry,
	"When the certificate the webhook port serves now expires, in seconds since the epoch: the manager's own "+
		"(renewed before it expires) or the one mounted (cert-manager, OLM). Absent until the port serves.", nil, nil)

// certificateExpiry collects MetricWebhookCertificateExpiry from the certificate s serves now.
type certificateExpiry struct{ s *Server }

func (certificateExpiry) Describe(ch chan<- *prometheus.Desc) { ch <- certificateExpiryDesc }

func (c certificateExpiry) Collect(ch chan<- prometheus.Metric) {
	get := c.s.serving.Load()
	if get == nil {
		return
	}
	cert, err := (*get)(&tls.ClientHelloInfo{})
	if err != nil || cert == nil || len(cert.Certificate) == 0 {
		return
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return
		}
	}
	ch <- prometheus.MustNewConstMetric(certificateExpiryDesc, prometheus.GaugeValue, float64(leaf.NotAfter.Unix()))
}

// Server is the manager's webhook server: controller-runtime's webhook.Server contract, served
// by an HTTP server whose every path is bounded by Limits. A request over a limit is answered
// 413 (too large), 503 (bodies of other requests fill the budget) or 408 (too slow), and counted.
type Server struct {
	options webhook.Options
	limits  Limits
	mux     *http.ServeMux
	bodies  *semaphore.Weighted
	slots   chan struct{}
	refused *prometheus.CounterVec
	metrics requestMetrics
	// serving is the GetCertificate of the TLS configuration, once Start has one.
	serving atomic.Pointer[func(*tls.ClientHelloInfo) (*tls.Certificate, error)]
	// admission and conversion are the shapes of the reviews the server reads.
	admission, conversion *jsonshape.Shape
	// clients, when not nil, are the client certificates admission requests must present.
	clients *clients

	mu      sync.Mutex
	started bool
	paths   map[string]bool
}

// NewServer returns the server of options (Host, Port, CertDir, CertName, KeyName, TLSOpts;
// ClientCAName and WebhookMux are not used) bounded by limits, registering its metrics with reg
// when reg is not nil. object is the shape of the objects its webhooks admit and convert (the
// union of the served versions' schemas, jsonshape.FromSchema); nil bounds them by
// limits.Review alone.
func NewServer(options webhook.Options, limits Limits, object *jsonshape.Shape, reg prometheus.Registerer) (*Server, error) {
	if options.Port == 0 {
		options.Port = webhook.DefaultPort
	}
	if options.CertName == "" {
		options.CertName = "tls.crt"
	}
	if options.KeyName == "" {
		options.KeyName = "tls.key"
	}
	if limits.MaxBodyBytes < max(limits.MaxAdmissionBytes, limits.MaxConversionBytes) {
		return nil, fmt.Errorf("the webhook server's body budget (%d bytes) is below its largest request (%d bytes)",
			limits.MaxBodyBytes, max(limits.MaxAdmissionBytes, limits.MaxConversionBytes))
	}
	if limits.MaxConnections < 1 {
		return nil, fmt.Errorf("the webhook server must take at least one connection at a time, not %d", limits.MaxConnections)
	}
	if limits.MaxInFlight < 1 {
		return nil, fmt.Errorf("the webhook server must handle at least one request at a time, not %d", limits.MaxInFlight)
	}
	s := &Server{
		options: options,
		limits:  limits,
		mux:     http.NewServeMux(),
		bodies:  semaphore.NewWeighted(limits.MaxBodyBytes),
		slots:   make(chan struct{}, limits.MaxInFlight),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricWebhookRefused,
			Help: "Requests the webhook server refused before any webhook saw them, by reason: too_large (body over its bound), busy (other requests' bodies fill the budget), slow (not sent within the read timeout), shape (over a bound of the served resource's schema or of the review, before decoding), unauthenticated (an admission request without the client certificate asked for).",
		}, []string{"reason"}),
		paths:      map[string]bool{},
		admission:  admissionReview(object, limits.MaxUserInfoBytes),
		conversion: conversionReview(object, limits.MaxConversionObjects),
	}
	for _, r := range []string{RefusedTooLarge, RefusedBusy, RefusedSlow, RefusedShape, RefusedUnauthenticated} {
		s.refused.WithLabelValues(r)
	}
	if reg != nil {
		if err := reg.Register(s.refused); err != nil {
			return nil, fmt.Errorf("register %s: %w", MetricWebhookRefused, err)
		}
	}
	m, err := newRequestMetrics(reg)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	if reg != nil {
		if err := reg.Register(certificateExpiry{s}); err != nil {
			return nil, fmt.Errorf("register %s: %w", MetricWebhookCertificateExpiry, err)
		}
	}
	return s, nil
}

var _ webhook.Server = &Server{}

// NeedLeaderElection is false: every replica serves webhooks.
func (s *Server) NeedLeaderElection() bool { return false }

// WebhookMux returns the multiplexer of the registered webhooks, without the server's bounds.
func (s *Server) WebhookMux() *http.ServeMux { return s.mux }

// Register serves hook at path, behind the bounds of its kind: conversion, or admission of the
// objects of the server's shape.
func (s *Server) Register(path string, hook http.Handler) {
	b := bounds{authenticated: true, limit: s.limits.MaxAdmissionBytes, shape: s.admission, review: s.limits.Review, valueCost: s.limits.ValueCost}
	if path == ConversionPath {
		// What a converted object costs is charged by the bound on their number. The apiserver
		// presents no client certificate to a conversion webhook, whatever its configuration.
		b = bounds{limit: s.limits.MaxConversionBytes, shape: s.conversion, review: s.limits.Review}
		b.review.MaxValues = 0
	}
	s.register(path, b, hook)
}

// RegisterAdmission serves the admission webhook hook at path for objects of another resource
// than the server's: bounded as the server's admission webhooks, by object's shape (nil: by
// Limits.Review alone) instead of the served resource's.
func (s *Server) RegisterAdmission(path string, object *jsonshape.Shape, hook http.Handler) {
	s.register(path, bounds{authenticated: true, limit: s.limits.MaxAdmissionBytes,
		shape: admissionReview(object, s.limits.MaxUserInfoBytes), review: s.limits.Review, valueCost: s.limits.ValueCost}, hook)
}

func (s *Server) register(path string, b bounds, hook http.Handler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paths[path] {
		panic(fmt.Errorf("webhook path %s registered twice", path))
	}
	s.paths[path] = true
	s.mux.Handle(path, s.metrics.instrument(path, s.bounded(b, hook)))
}

// bounds are what the server admits on one path: the bytes of a body, its shape and what each
// of its values costs.
type bounds struct {
	// authenticated asks for the client certificate of s.clients, when there is one.
	authenticated bool
	limit         int64
	shape         *jsonshape.Shape
	review        jsonshape.Limits
	valueCost     int64
}

// errBusy is returned by readBody when the bodies of other requests fill the budget.
var errBusy = errors.New("the webhook server holds as many request bodies as it may; retry")

// bounded reads the body of a request (at most b.limit bytes, counted against the body budget
// as they arrive), checks its shape (400 when over a bound), charges the budget for its values,
// waits for a free handling slot, and hands the request to next with its body in memory. The
// budget is given back when next returns. A request whose caller has gone is dropped before
// next sees it.
func (s *Server) bounded(b bounds, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if b.authenticated && s.clients != nil {
			if err := s.clients.check(r.TLS); err != nil {
				s.refuse(w, RefusedUnauthenticated, http.StatusForbidden, err.Error())
				return
			}
		}
		if r.ContentLength > b.limit {
			s.refuse(w, RefusedTooLarge, http.StatusRequestEntityTooLarge,
				fmt.Sprintf("request body of %d bytes is over the limit of %d bytes", r.ContentLength, b.limit))
			return
		}
		body, held, err := s.readBody(r.Body, b.limit)
		defer func() { s.bodies.Release(held) }()
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			s.refuse(w, RefusedTooLarge, http.StatusRequestEntityTooLarge,
				fmt.Sprintf("request body is over the limit of %d bytes", b.limit))
			return
		case errors.Is(err, errBusy):
			s.busy(w)
			return
		case err != nil:
			s.refuse(w, RefusedSlow, http.StatusRequestTimeout, "request body not received: "+err.Error())
			return
		}
		values, err := jsonshape.Check(body.Bytes(), b.shape, b.review)
		if err != nil {
			s.refuse(w, RefusedShape, http.StatusBadRequest, "request body refused before decoding: "+err.Error())
			return
		}
		if cost := int64(values) * b.valueCost; cost > 0 {
			if !s.bodies.TryAcquire(cost) {
				s.busy(w)
				return
			}
			held += cost
		}
		select {
		case s.slots <- struct{}{}:
			defer func() { <-s.slots }()
		case <-r.Context().Done():
			return
		}
		if r.Context().Err() != nil {
			return
		}
		r.Body = io.NopCloser(body)
		r.ContentLength = int64(body.Len())
		next.ServeHTTP(w, r)
	})
}

// busy answers that the bodies of other requests fill the budget.
func (s *Server) busy(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	s.refuse(w, RefusedBusy, http.StatusServiceUnavailable, errBusy.Error())
}

// readBody reads at most limit bytes of body, acquiring from the budget what each read brought
// before it keeps it; it returns what it read and how much of the budget it holds (to release,
// also on error). A client that sends slowly holds what it sent, and one scratch buffer.
func (s *Server) readBody(body io.Reader, limit int64) (*bytes.Buffer, int64, error) {
	var (
		buf     bytes.Buffer
		held    int64
		scratch = make([]byte, 4<<10)
	)
	r := http.MaxBytesReader(nil, io.NopCloser(body), limit)
	for {
		n, err := r.Read(scratch)
		if n > 0 {
			if !s.bodies.TryAcquire(int64(n)) {
				return &buf, held, errBusy
			}
			held += int64(n)
			buf.Write(scratch[:n])
		}
		switch {
		case errors.Is(err, io.EOF):
			return &buf, held, nil
		case err != nil:
			return &buf, held, err
		}
	}
}

func (s *Server) refuse(w http.ResponseWriter, reason string, code int, msg string) {
	s.refused.WithLabelValues(reason).Inc()
	w.Header().Set("Connection", "close")
	http.Error(w, msg, code)
}

// Start serves until ctx is done, then shuts down within a minute.
func (s *Server) Start(ctx context.Context) error {
	log := logf.Log.WithName("webhook-server")
	cfg := &tls.Config{NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12}
	for _, o := range s.options.TLSOpts {
		o(cfg)
	}
	if s.clients != nil {
		// Asked, and checked when given; required on the admission paths only (bounded).
		cfg.ClientAuth, cfg.ClientCAs = tls.VerifyClientCertIfGiven, s.clients.cas
	}
	if cfg.GetCertificate == nil {
		w, err := certwatcher.New(filepath.Join(s.options.CertDir, s.options.CertName),
			filepath.Join(s.options.CertDir, s.options.KeyName))
		if err != nil {
			return err
		}
		cfg.GetCertificate = w.GetCertificate
		go func() {
			if err := w.Start(ctx); err != nil {
				log.Error(err, "certificate watcher")
			}
		}()
	}
	s.serving.Store(&cfg.GetCertificate)
	tcp, err := net.Listen("tcp", net.JoinHostPort(s.options.Host, strconv.Itoa(s.options.Port)))
	if err != nil {
		return err
	}
	l := tls.NewListener(netutil.LimitListener(tcp, s.limits.MaxConnections), cfg)
	srv := &http.Server{
		Handler:           s.mux,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ReadHeaderTimeout: s.limits.ReadHeaderTimeout,
		ReadTimeout:       s.limits.ReadTimeout,
		WriteTimeout:      s.limits.WriteTimeout,
		IdleTimeout:       s.limits.IdleTimeout,
		MaxHeaderBytes:    s.limits.MaxHeaderBytes,
		// TLS handshakes that fail (probes, port scans) are not the manager's errors.
		ErrorLog: stdlog.New(io.Discard, "", 0),
	}
	log.Info("Serving webhooks", "host", s.options.Host, "port", s.options.Port,
		"maxAdmissionBytes", s.limits.MaxAdmissionBytes, "maxConversionBytes", s.limits.MaxConversionBytes,
		"maxBodyBytes", s.limits.MaxBodyBytes, "maxInFlight", s.limits.MaxInFlight, "maxConnections", s.limits.MaxConnections,
		"maxConversionObjects", s.limits.MaxConversionObjects)
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			log.Error(err, "shut down the webhook server")
		}
	}()
	s.mu.Lock()
	s.started = true
	s.mu.Unlock()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	<-done
	return nil
}

// StartedChecker is healthy once the server accepts TLS connections.
func (s *Server) StartedChecker() healthz.Checker {
	return func(*http.Request) error {
		s.mu.Lock()
		started := s.started
		s.mu.Unlock()
		if !started {
			return errors.New("webhook server has not been started yet")
		}
		d := &net.Dialer{Timeout: 10 * time.Second}
		host := s.options.Host
		if host == "" {
			host = "127.0.0.1"
		}
		conn, err := tls.DialWithDialer(d, "tcp", net.JoinHostPort(host, strconv.Itoa(s.options.Port)),
			&tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only checks that the port serves TLS
		if err != nil {
			return fmt.Errorf("webhook server is not reachable: %w", err)
		}
		return conn.Close()
	}
}
