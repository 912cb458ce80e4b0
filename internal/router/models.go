package router

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc/status"

	"github.com/ndsl-cn/pipeline-operator/internal/router/oip"
)

const (
	// metadataTimeout bounds one read of a model's metadata.
	metadataTimeout = 5 * time.Second
	// metadataRetry is the wait before a model's metadata is read again, while its server does
	// not give it (the model still loads).
	metadataRetry = 2 * time.Second
	// metadataLogEvery is how often the router says which models it still waits for.
	metadataLogEvery = 30 * time.Second
	// maxMetadataBytes bounds a model metadata answer.
	maxMetadataBytes = 1 << 20
)

// MappingError is a configuration whose tensor mappings the models' metadata refuse: each
// problem says which input of which step, and why.
type MappingError struct {
	Problems []string
}

func (e *MappingError) Error() string {
	return "the tensor mappings do not fit the models: " + strings.Join(e.Problems, "; ")
}

// NeedsModels reports whether the router reads model metadata before it is ready: some step
// has mapped inputs.
func (r *Router) NeedsModels() bool { return r.graph.anyMapped }

// CheckModels reads the model metadata of every step that has mapped inputs or whose outputs
// are mapped, reading again every metadataRetry a model whose server does not give it yet, and
// checks every mapping against it: the tensors exist, their datatypes are the same and their
// shapes can be. It returns a *MappingError when a mapping does not fit, ctx's error when ctx
// ends first, and nil once every mapping fits: the router is then ready.
func (r *Router) CheckModels(ctx context.Context) error {
	client := &http.Client{Timeout: metadataTimeout, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1}}
	defer client.CloseIdleConnections()
	lastLog := time.Time{}
	for {
		var waiting []string
		for _, s := range r.modelSteps() {
			if s.model.Load() != nil {
				continue
			}
			m, err := s.readModel(ctx, client)
			if err != nil {
				waiting = append(waiting, fmt.Sprintf("%s: %v", s.label(), err))
				continue
			}
			s.model.Store(m)
		}
		if len(waiting) == 0 {
			break
		}
		if time.Since(lastLog) >= metadataLogEvery {
			r.log.Info("waiting for the models' metadata", "pipeline", r.pipeline, "steps", strings.Join(waiting, "; "))
			lastLog = time.Now()
		}
		t := time.NewTimer(metadataRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	if problems := r.mappingProblems(); len(problems) > 0 {
		return &MappingError{Problems: problems}
	}
	return nil
}

// modelSteps are the steps whose model metadata the mappings are checked against.
func (r *Router) modelSteps() []*step {
	var out []*step
	for i, s := range r.steps {
		if s.inputs != nil || r.graph.mapped[i+1] {
			out = append(out, s)
		}
	}
	return out
}

// mappingProblems checks every mapped input, and every tensor of the pipeline's answer,
// against the models' metadata.
func (r *Router) mappingProblems() []string {
	var problems []string
	for _, s := range r.steps {
		model := s.model.Load()
		for _, name := range s.outputs {
			if !hasOutput(model, name) {
				problems = append(problems, fmt.Sprintf("output %q asked for by %s: model %s has no output %q (its outputs: %s)",
					name, s.label(), model.Name, name, tensorNames(model.Outputs)))
			}
		}
		for _, in := range s.inputs {
			want, ok := model.Input(in.name)
			if !ok {
				problems = append(problems, fmt.Sprintf("input %q of %s: model %s has no input %q (its inputs: %s)",
					in.name, s.label(), model.Name, in.name, tensorNames(model.Inputs)))
				continue
			}
			if in.source == 0 {
				// The request's tensors are checked as each request comes.
				continue
			}
			src := r.steps[in.source-1]
			srcModel := src.model.Load()
			have, ok := srcModel.Output(in.tensor)
			if !ok {
				problems = append(problems, fmt.Sprintf("input %q of %s: model %s of %s has no output %q (its outputs: %s)",
					in.name, s.label(), srcModel.Name, src.label(), in.tensor, tensorNames(srcModel.Outputs)))
				continue
			}
			if err := oip.Fits(have, want); err != nil {
				problems = append(problems, fmt.Sprintf("input %q of %s: output %q of %s has %v",
					in.name, s.label(), in.tensor, src.label(), err))
			}
		}
	}
	for _, out := range r.outputs {
		src := r.steps[out.source-1]
		if m := src.model.Load(); !hasOutput(m, out.tensor) {
			problems = append(problems, fmt.Sprintf("output %q of the pipeline's answer: model %s of %s has no output %q (its outputs: %s)",
				out.name, m.Name, src.label(), out.tensor, tensorNames(m.Outputs)))
		}
	}
	return problems
}

func hasOutput(m *oip.ModelMetadata, name string) bool {
	_, ok := m.Output(name)
	return ok
}

func tensorNames(ts []oip.TensorMetadata) string {
	if len(ts) == 0 {
		return "none"
	}
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	return strings.Join(names, ", ")
}

// readMetadata GETs a model's metadata at url.
func readMetadata(ctx context.Context, client *http.Client, url string) (*oip.ModelMetadata, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "pipeline-router")
	res, err := client.Do(req)
	if err != nil {
		var uerr interface{ Unwrap() error }
		if errors.As(err, &uerr) {
			err = uerr.Unwrap()
		}
		return nil, fmt.Errorf("no answer: %w", err)
	}
	defer func() { _ = res.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(res.Body, maxMetadataBytes+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("read the answer: %w", err)
	case res.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("answered %s", res.Status)
	case len(data) > maxMetadataBytes:
		return nil, fmt.Errorf("answered more than %d bytes", maxMetadataBytes)
	}
	return oip.ParseModelMetadata(data)
}

// readModel reads the step's model metadata: with ModelMetadata for a gRPC step, else at its
// metadataURL.
func (s *step) readModel(ctx context.Context, client *http.Client) (*oip.ModelMetadata, error) {
	if s.grpc == nil {
		return readMetadata(ctx, client, s.metadataURL)
	}
	ctx, cancel := context.WithTimeout(ctx, metadataTimeout)
	defer cancel()
	m, err := grpcMetadata(ctx, s.grpc)
	if err != nil {
		return nil, fmt.Errorf("ModelMetadata: %s", status.Convert(err).Message())
	}
	return m, nil
}
