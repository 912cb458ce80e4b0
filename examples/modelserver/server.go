package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
)

// maxRequest bounds an infer request's body.
const maxRequest = 1 << 20

// server serves one model by the Open Inference Protocol's REST paths.
type server struct {
	name  string
	model atomic.Pointer[model]
}

func (s *server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v2/health/live", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("GET /v2/health/ready", s.ready)
	mux.HandleFunc("GET /v2/models/{model}/ready", s.modelHandler(func(w http.ResponseWriter, _ *http.Request, _ *model) {
		w.WriteHeader(http.StatusOK)
	}))
	mux.HandleFunc("GET /v2/models/{model}", s.modelHandler(s.metadata))
	mux.HandleFunc("POST /v2/models/{model}/infer", s.modelHandler(s.infer))
	return mux
}

func (s *server) ready(w http.ResponseWriter, _ *http.Request) {
	if s.model.Load() == nil {
		writeError(w, http.StatusServiceUnavailable, "model "+s.name+" is loading")
		return
	}
	w.WriteHeader(http.StatusOK)
}

// modelHandler answers 404 for another model and 503 while the model loads.
func (s *server) modelHandler(h func(http.ResponseWriter, *http.Request, *model)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("model") != s.name {
			writeError(w, http.StatusNotFound, fmt.Sprintf("this server serves model %s, not %s", s.name, r.PathValue("model")))
			return
		}
		m := s.model.Load()
		if m == nil {
			writeError(w, http.StatusServiceUnavailable, "model "+s.name+" is loading")
			return
		}
		h(w, r, m)
	}
}

func (s *server) metadata(w http.ResponseWriter, _ *http.Request, m *model) {
	writeJSON(w, http.StatusOK, map[string]any{
		"name": s.name, "versions": []string{"1"}, "platform": "modelserver-" + m.Kind,
		"inputs": m.inputs(), "outputs": m.outputs(),
	})
}

// inferRequest is the part of a request the server reads.
type inferRequest struct {
	ID     string       `json:"id,omitempty"`
	Inputs []inferInput `json:"inputs"`
}

type inferInput struct {
	Name     string          `json:"name"`
	Datatype string          `json:"datatype"`
	Shape    []int64         `json:"shape"`
	Data     json.RawMessage `json:"data"`
	// flat is the data as numbers already, when it came over gRPC.
	flat []float64
}

func (s *server) infer(w http.ResponseWriter, r *http.Request, m *model) {
	if r.Header.Get("Inference-Header-Content-Length") != "" {
		writeError(w, http.StatusBadRequest, "this server reads JSON tensor data only, not the binary data extension")
		return
	}
	var req inferRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequest)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "read the request: "+err.Error())
		return
	}
	rows, err := inputRows(m, req.Inputs)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"model_name": s.name, "model_version": "1", "id": req.ID, "outputs": m.compute(rows),
	})
}

// inputRows finds the model's input among the request's and cuts its data into rows.
func inputRows(m *model, inputs []inferInput) ([][]float64, error) {
	for _, in := range inputs {
		if in.Name != m.Input {
			continue
		}
		width := m.features()
		if len(in.Shape) != 2 || in.Shape[1] != int64(width) || in.Shape[0] < 1 || in.Shape[0] > 1024 {
			return nil, fmt.Errorf("input %s must have shape [n, %d] with 1 <= n <= 1024, not %v", m.Input, width, in.Shape)
		}
		if in.Datatype != "FP32" && in.Datatype != "FP64" {
			return nil, fmt.Errorf("input %s must be FP32, not %s", m.Input, in.Datatype)
		}
		flat := in.flat
		if flat == nil {
			var err error
			if flat, err = flatten(in.Data); err != nil {
				return nil, fmt.Errorf("input %s: %w", m.Input, err)
			}
		}
		if int64(len(flat)) != in.Shape[0]*in.Shape[1] {
			return nil, fmt.Errorf("input %s has %d numbers, its shape %v says %d", m.Input, len(flat), in.Shape, in.Shape[0]*in.Shape[1])
		}
		rows := make([][]float64, in.Shape[0])
		for i := range rows {
			rows[i] = flat[i*width : (i+1)*width]
		}
		return rows, nil
	}
	return nil, fmt.Errorf("the request has no input %s", m.Input)
}

// flatten reads tensor data written flat ([1, 2, 3, 4]) or row by row ([[1, 2], [3, 4]]).
func flatten(data json.RawMessage) ([]float64, error) {
	var flat []float64
	if err := json.Unmarshal(data, &flat); err == nil {
		return flat, nil
	}
	var rows [][]float64
	if err := json.Unmarshal(data, &rows); err != nil {
		return nil, fmt.Errorf("data must be numbers, flat or in rows: %w", err)
	}
	flat = flat[:0] // what the failed flat reading left
	for _, r := range rows {
		flat = append(flat, r...)
	}
	return flat, nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}
