package v1

import (
	"strconv"
	"strings"
)

// SetSummary sets ready and modelNames, what the printer columns show, from readySteps,
// totalSteps and models.
func (s *PipelineStatus) SetSummary() {
	s.Ready = ""
	if s.ReadySteps != nil && s.TotalSteps != nil {
		s.Ready = strconv.Itoa(int(*s.ReadySteps)) + "/" + strconv.Itoa(int(*s.TotalSteps))
	}
	s.ModelNames = strings.Join(s.Models, ", ")
}
