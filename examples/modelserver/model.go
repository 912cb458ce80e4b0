package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
)

// modelFile is the file of a model in its directory.
const modelFile = "model.json"

// model is a loaded model: what it takes and gives, and how it computes.
type model struct {
	Kind   string `json:"kind"`
	Input  string `json:"input"`
	Output string `json:"output,omitempty"`
	// A scaler's: each feature becomes (x - mean) / std.
	Mean []float64 `json:"mean,omitempty"`
	Std  []float64 `json:"std,omitempty"`
	// A linear-softmax classifier's: the probability of class k is the softmax of
	// weights[k]·x + bias[k]; its label is the most probable class's.
	Labels  []string    `json:"labels,omitempty"`
	Weights [][]float64 `json:"weights,omitempty"`
	Bias    []float64   `json:"bias,omitempty"`
}

const (
	kindScaler     = "scaler"
	kindClassifier = "linear-softmax"
	// The outputs of a classifier.
	outputProbabilities = "probabilities"
	outputLabel         = "label"
)

// loadModel reads the model in dir and checks that its weights fit together.
func loadModel(dir string) (*model, error) {
	data, err := os.ReadFile(filepath.Join(dir, modelFile))
	if err != nil {
		return nil, fmt.Errorf("no model in %s: %w", dir, err)
	}
	m := &model{}
	if err := json.Unmarshal(data, m); err != nil {
		return nil, fmt.Errorf("read %s: %w", filepath.Join(dir, modelFile), err)
	}
	if m.Input == "" {
		return nil, errors.New("the model names no input")
	}
	switch m.Kind {
	case kindScaler:
		if m.Output == "" || len(m.Mean) == 0 || len(m.Mean) != len(m.Std) {
			return nil, errors.New("a scaler needs an output and as many means as deviations")
		}
		for _, s := range m.Std {
			if s == 0 {
				return nil, errors.New("a scaler's deviations must not be 0")
			}
		}
	case kindClassifier:
		if len(m.Labels) == 0 || len(m.Weights) != len(m.Labels) || len(m.Bias) != len(m.Labels) {
			return nil, errors.New("a classifier needs one row of weights and one bias per label")
		}
		for _, w := range m.Weights {
			if len(w) != len(m.Weights[0]) || len(w) == 0 {
				return nil, errors.New("a classifier's rows of weights must have the same, non-zero, length")
			}
		}
	default:
		return nil, fmt.Errorf("unknown model kind %q (%s or %s)", m.Kind, kindScaler, kindClassifier)
	}
	return m, nil
}

// features is how many numbers one row of the model's input holds.
func (m *model) features() int {
	if m.Kind == kindScaler {
		return len(m.Mean)
	}
	return len(m.Weights[0])
}

// tensorMeta is a tensor of a model's metadata.
type tensorMeta struct {
	Name     string  `json:"name"`
	Datatype string  `json:"datatype"`
	Shape    []int64 `json:"shape"`
}

func (m *model) inputs() []tensorMeta {
	return []tensorMeta{{Name: m.Input, Datatype: "FP32", Shape: []int64{-1, int64(m.features())}}}
}

func (m *model) outputs() []tensorMeta {
	if m.Kind == kindScaler {
		return []tensorMeta{{Name: m.Output, Datatype: "FP32", Shape: []int64{-1, int64(len(m.Mean))}}}
	}
	return []tensorMeta{
		{Name: outputProbabilities, Datatype: "FP32", Shape: []int64{-1, int64(len(m.Labels))}},
		{Name: outputLabel, Datatype: "BYTES", Shape: []int64{-1}},
	}
}

// outputTensor is a tensor of an answer.
type outputTensor struct {
	Name     string  `json:"name"`
	Datatype string  `json:"datatype"`
	Shape    []int64 `json:"shape"`
	Data     any     `json:"data"`
}

// compute runs the model on rows of its input.
func (m *model) compute(rows [][]float64) []outputTensor {
	n := int64(len(rows))
	if m.Kind == kindScaler {
		out := make([]float64, 0, len(rows)*len(m.Mean))
		for _, r := range rows {
			for i, x := range r {
				out = append(out, round((x-m.Mean[i])/m.Std[i]))
			}
		}
		return []outputTensor{{Name: m.Output, Datatype: "FP32", Shape: []int64{n, int64(len(m.Mean))}, Data: out}}
	}
	probs := make([]float64, 0, len(rows)*len(m.Labels))
	labels := make([]string, 0, len(rows))
	for _, r := range rows {
		scores := make([]float64, len(m.Labels))
		best := 0
		for k, w := range m.Weights {
			scores[k] = m.Bias[k]
			for i, x := range r {
				scores[k] += w[i] * x
			}
			if scores[k] > scores[best] {
				best = k
			}
		}
		var sum float64
		for k := range scores {
			scores[k] = math.Exp(scores[k] - scores[best])
			sum += scores[k]
		}
		for _, s := range scores {
			probs = append(probs, round(s/sum))
		}
		labels = append(labels, m.Labels[best])
	}
	return []outputTensor{
		{Name: outputProbabilities, Datatype: "FP32", Shape: []int64{n, int64(len(m.Labels))}, Data: probs},
		{Name: outputLabel, Datatype: "BYTES", Shape: []int64{n}, Data: labels},
	}
}

// round keeps four decimals: FP32 answers read the same on every platform.
func round(x float64) float64 { return math.Round(x*1e4) / 1e4 }
