// Package problem is the vocabulary the operator's packages share to say what went wrong: a
// Problem (a Degraded reason and message), errors that carry the reason the Reconciled
// condition reports, and the shaping of condition messages. It sits below every other package
// of the operator and imports none of them.
package problem

import (
	"errors"
	"strings"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// Problem is something about a Pipeline that needs a person: a Degraded reason and message.
type Problem struct {
	// Reason is the Degraded reason, one of the Reason constants of the API.
	Reason string
	// Message says what is wrong, naming the object, and what to do.
	Message string
	// Notice marks a problem that degrades the Pipeline but stops nothing (a step's node is
	// cordoned while its pods keep serving): it makes Degraded True, but neither the phase
	// failed nor the rollout failed.
	Notice bool
}

// Failing reports whether any of problems stops the Pipeline: one that is not a notice.
func Failing(problems []Problem) bool {
	for _, pr := range problems {
		if !pr.Notice {
			return true
		}
	}
	return false
}

// reasonError is an error of a pass with the Reconciled reason it reports.
type reasonError struct {
	reason string
	err    error
}

func (e *reasonError) Error() string { return e.err.Error() }

func (e *reasonError) Unwrap() error { return e.err }

// WithReason marks err with the reason the Reconciled condition reports for it.
func WithReason(reason string, err error) error {
	return &reasonError{reason: reason, err: err}
}

// ReasonOf is the Reconciled reason of an error returned by a pass: the first reason marked
// in it, else ReconcileFailed.
func ReasonOf(err error) string {
	var re *reasonError
	if errors.As(err, &re) {
		return re.reason
	}
	return pipelinev1.ReasonReconcileFailed
}

// Find returns every error of err's tree (errors.Join and %w included) marked with reason, in
// order, each with the context that wraps it ("step 1 (detect): ...").
func Find(err error, reason string) []error {
	var out []error
	// top is e with the context wrapped around it since the nearest join.
	var walk func(e, top error)
	walk = func(e, top error) {
		if re, ok := e.(*reasonError); ok && re.reason == reason {
			out = append(out, top)
			return
		}
		switch x := e.(type) {
		case interface{ Unwrap() []error }:
			for _, inner := range x.Unwrap() {
				walk(inner, inner)
			}
		case interface{ Unwrap() error }:
			if inner := x.Unwrap(); inner != nil {
				walk(inner, top)
			}
		}
	}
	if err != nil {
		walk(err, err)
	}
	return out
}

// OnlyReason reports whether err, and every error it joins, is marked with reason.
func OnlyReason(err error, reason string) bool {
	if re, ok := err.(*reasonError); ok {
		return re.reason == reason
	}
	switch e := err.(type) {
	case interface{ Unwrap() []error }:
		inner := e.Unwrap()
		for _, x := range inner {
			if !OnlyReason(x, reason) {
				return false
			}
		}
		return len(inner) > 0
	case interface{ Unwrap() error }:
		if inner := e.Unwrap(); inner != nil {
			return OnlyReason(inner, reason)
		}
	}
	return false
}

// OnlyConflicts reports whether err, and every error it joins, is a conflict.
func OnlyConflicts(err error) bool {
	switch e := err.(type) {
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			if !OnlyConflicts(inner) {
				return false
			}
		}
		return true
	case interface{ Unwrap() error }:
		if inner := e.Unwrap(); inner != nil {
			return OnlyConflicts(inner)
		}
	}
	return apierrors.IsConflict(err)
}

// MaxMessageLength is the longest condition message the API accepts.
const MaxMessageLength = 1024

// JoinMessages joins messages for a condition, keeping it readable and within the API's bound.
func JoinMessages(msgs []string) string {
	return Truncate(strings.Join(msgs, "; "), MaxMessageLength)
}

// Truncate shortens s to at most n bytes, ending it in "..." when it was longer. It cuts on a
// rune boundary, so that a message of valid UTF-8 stays valid.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
