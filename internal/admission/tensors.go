package admission

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// validateTensorInputs checks the steps' inputs (tensor mapping): the router makes a step's
// request of them, so the Pipeline's data path must be the router, and each input taken from a
// step must name an earlier one that speaks the Open Inference Protocol. Whether the tensors
// exist and fit is the models' to say: the router checks it against their metadata. Messages
// are in the spelling n: a v1beta1 client, which cannot see inputs (they are kept in the
// conversion data), gets here by turning the router off.
func validateTensorInputs(p *pipelinev1.Pipeline, stepsPath *field.Path, n fieldNames) field.ErrorList {
	var errs field.ErrorList
	earlier := make(map[string]*pipelinev1.Step, len(p.Spec.Steps))
	for i := range p.Spec.Steps {
		s := &p.Spec.Steps[i]
		ip := stepsPath.Index(i).Child("inputs")
		if len(s.Inputs) > 0 && !p.Spec.RouterEnabled() {
			errs = append(errs, field.Forbidden(ip, n.routerForInputs()))
		}
		for j, in := range s.Inputs {
			if in.Step == "" {
				continue
			}
			sp := ip.Index(j).Child("step")
			from, ok := earlier[in.Step]
			switch {
			case in.Step == s.Name:
				errs = append(errs, field.Invalid(sp, in.Step, "a step cannot take an input from its own answer: name an earlier step"))
			case !ok:
				errs = append(errs, field.Invalid(sp, in.Step, "not an earlier step: an input is taken from the answer of a step before this one"))
			case !from.Protocol.OpenInference():
				errs = append(errs, field.Invalid(sp, in.Step,
					"that step's protocol is neither OpenInferenceProtocol nor OpenInferenceProtocolGRPC: only their answers have output tensors"))
			default:
				if err := askedFor(from, in.Tensor, ip.Index(j).Child("tensor")); err != nil {
					errs = append(errs, err)
				}
			}
		}
		earlier[s.Name] = s
	}
	return errs
}

// validateAnswerOutputs checks the tensors the pipeline's answer is made of: each from a step of
// the Pipeline that speaks the Open Inference Protocol. Whether the step's model has the tensor
// is its metadata's to say: the router checks it.
func validateAnswerOutputs(p *pipelinev1.Pipeline, rt *pipelinev1.Router, routerPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for j, out := range rt.Outputs {
		sp := routerPath.Child("outputs").Index(j).Child("step")
		i := slices.IndexFunc(p.Spec.Steps, func(s pipelinev1.Step) bool { return s.Name == out.Step })
		switch {
		case i < 0:
			errs = append(errs, field.Invalid(sp, out.Step, "not a step of this Pipeline: name the step whose answer has the tensor"))
		case !p.Spec.Steps[i].Protocol.OpenInference():
			errs = append(errs, field.Invalid(sp, out.Step,
				"that step's protocol is neither OpenInferenceProtocol nor OpenInferenceProtocolGRPC: only their answers have output tensors"))
		default:
			if err := askedFor(&p.Spec.Steps[i], out.Tensor, routerPath.Child("outputs").Index(j).Child("tensor")); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errs
}

// askedFor checks that the answer of step s can have tensor (at path): a step whose request
// names its outputs gets those alone.
func askedFor(s *pipelinev1.Step, tensor string, path *field.Path) *field.Error {
	if len(s.Outputs) == 0 || slices.Contains(s.Outputs, tensor) {
		return nil
	}
	return field.Invalid(path, tensor, fmt.Sprintf("step %s asks its model only for the outputs %s: add the tensor to its outputs",
		s.Name, strings.Join(s.Outputs, ", ")))
}
