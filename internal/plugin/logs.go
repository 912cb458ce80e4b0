package plugin

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The containers the operator names in step and router pods, and the labels of the router's
// pods (the same since 0.1.0: docs/api.md, Labels on children).
const (
	stepContainer    = "step"
	routerContainer  = "router"
	labelPipeline    = "pipeline"
	labelName        = "app.kubernetes.io/name"
	routerLabelValue = "pipeline-router"
)

// maxLogLine is the longest log line read; a longer one is cut.
const maxLogLine = 1 << 20

// LogOptions say which logs to read.
type LogOptions struct {
	// Follow streams the logs until the context ends.
	Follow bool
	// Tail is the number of lines from the end of each pod's log to show; negative: all.
	Tail int64
}

// FindStep is the step of p named step, or at the 1-based position step when no step has that
// name.
func FindStep(p Pipeline, step string) (Step, error) {
	for _, s := range p.Steps {
		if s.Name == step {
			return s, nil
		}
	}
	if n, err := strconv.Atoi(step); err == nil && n >= 1 && n <= len(p.Steps) {
		return p.Steps[n-1], nil
	}
	names := make([]string, len(p.Steps))
	for i, s := range p.Steps {
		names[i] = s.Name
	}
	return Step{}, fmt.Errorf("pipeline %s/%s has no step %q: its steps are %s (or 1 to %d)",
		p.Namespace, p.Name, step, strings.Join(names, ", "), len(p.Steps))
}

// StepPods are the pods of step of p: those its Deployment's selector selects, by name.
func (s *Server) StepPods(ctx context.Context, p Pipeline, step Step) ([]corev1.Pod, error) {
	if step.Deployment == "" {
		return nil, fmt.Errorf("step %s of pipeline %s/%s has no Deployment in the status yet", step.Name, p.Namespace, p.Name)
	}
	d, err := s.Core.AppsV1().Deployments(p.Namespace).Get(ctx, step.Deployment, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get the Deployment %s of step %s: %w", step.Deployment, step.Name, err)
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("the selector of Deployment %s: %w", d.Name, err)
	}
	return s.pods(ctx, p.Namespace, sel)
}

// RouterPods are the pods of p's router, by name.
func (s *Server) RouterPods(ctx context.Context, p Pipeline) ([]corev1.Pod, error) {
	return s.pods(ctx, p.Namespace, labels.SelectorFromSet(labels.Set{labelPipeline: p.Name, labelName: routerLabelValue}))
}

func (s *Server) pods(ctx context.Context, namespace string, sel labels.Selector) ([]corev1.Pod, error) {
	list, err := s.Core.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("list pods %s: %w", sel, err)
	}
	pods := list.Items
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods, nil
}

// containerOf is the container of pod whose logs are read: the one named want, else the first.
func containerOf(pod corev1.Pod, want string) string {
	for _, c := range pod.Spec.Containers {
		if c.Name == want {
			return c.Name
		}
	}
	if len(pod.Spec.Containers) > 0 {
		return pod.Spec.Containers[0].Name
	}
	return ""
}

// StepLogs writes the logs of pods (a step's) to out, each line escaped (Printable) and
// prefixed with "[<pod>] " when there are several pods. Without Follow the pods' logs come one
// after another; with Follow they are streamed together, line by line, until ctx ends or every
// stream does. An error of one pod is written to errOut and the others go on; it is returned
// when every pod failed.
func (s *Server) StepLogs(ctx context.Context, out, errOut io.Writer, pods []corev1.Pod, o LogOptions) error {
	if len(pods) == 0 {
		return errors.New("the step has no pods")
	}
	prefix := len(pods) > 1
	var mu sync.Mutex
	write := func(pod, line string) {
		mu.Lock()
		defer mu.Unlock()
		line = Printable(line)
		if prefix {
			line = "[" + pod + "] " + line
		}
		_, _ = io.WriteString(out, line+"\n")
	}
	var failed []error
	fail := func(pod string, err error) {
		mu.Lock()
		defer mu.Unlock()
		failed = append(failed, err)
		_, _ = fmt.Fprintf(errOut, "pod %s: %s\n", pod, PrintableLines(err.Error()))
	}
	read := func(pod corev1.Pod) {
		opts := &corev1.PodLogOptions{Container: containerOf(pod, stepContainer), Follow: o.Follow}
		if o.Tail >= 0 {
			opts.TailLines = &o.Tail
		}
		err := s.streamLines(ctx, pod, opts, func(line string) { write(pod.Name, line) })
		if err != nil && ctx.Err() == nil {
			fail(pod.Name, err)
		}
	}
	if o.Follow {
		var wg sync.WaitGroup
		for _, pod := range pods {
			wg.Go(func() { read(pod) })
		}
		wg.Wait()
	} else {
		for _, pod := range pods {
			read(pod)
		}
	}
	if len(failed) == len(pods) {
		return fmt.Errorf("no pod's logs could be read: %w", errors.Join(failed...))
	}
	return nil
}

// streamLines reads the log of pod as opts say and calls line with every line.
func (s *Server) streamLines(ctx context.Context, pod corev1.Pod, opts *corev1.PodLogOptions, line func(string)) error {
	rc, err := s.Core.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, opts).Stream(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = rc.Close() }()
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 0, 64*1024), maxLogLine)
	for sc.Scan() {
		line(sc.Text())
	}
	return sc.Err()
}

// TraceLine is a line of a router pod's log that names a request id.
type TraceLine struct {
	// Time is when the kubelet received the line (zero when the line carries no timestamp).
	Time time.Time
	Pod  string
	Line string
}

// Trace reads the logs of the router pods and returns their lines that name requestID, oldest
// first. An error of one pod is written to errOut and the others are read; it is returned when
// every pod failed.
func (s *Server) Trace(ctx context.Context, errOut io.Writer, pods []corev1.Pod, requestID string) ([]TraceLine, error) {
	var found []TraceLine
	var failed []error
	for _, pod := range pods {
		opts := &corev1.PodLogOptions{Container: containerOf(pod, routerContainer), Timestamps: true}
		err := s.streamLines(ctx, pod, opts, func(line string) {
			t, text := splitTimestamp(line)
			if NamesRequest(text, requestID) {
				found = append(found, TraceLine{Time: t, Pod: pod.Name, Line: text})
			}
		})
		if err != nil {
			failed = append(failed, err)
			_, _ = fmt.Fprintf(errOut, "pod %s: %s\n", pod.Name, PrintableLines(err.Error()))
		}
	}
	if len(pods) > 0 && len(failed) == len(pods) {
		return nil, fmt.Errorf("no router pod's logs could be read: %w", errors.Join(failed...))
	}
	SortTrace(found)
	return found, nil
}

// SortTrace orders lines by time, keeping the order of lines of the same time.
func SortTrace(lines []TraceLine) {
	slices.SortStableFunc(lines, func(a, b TraceLine) int { return a.Time.Compare(b.Time) })
}

// WriteTrace writes lines, one a line: time, pod, the log line escaped (Printable).
func WriteTrace(w io.Writer, lines []TraceLine) error {
	var b strings.Builder
	for _, l := range lines {
		ts := "-"
		if !l.Time.IsZero() {
			ts = l.Time.UTC().Format(time.RFC3339Nano)
		}
		fmt.Fprintf(&b, "%s %s %s\n", ts, l.Pod, Printable(l.Line))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// splitTimestamp splits the kubelet's timestamp (RFC 3339, then a space) off line.
func splitTimestamp(line string) (time.Time, string) {
	head, rest, ok := strings.Cut(line, " ")
	if !ok {
		return time.Time{}, line
	}
	t, err := time.Parse(time.RFC3339Nano, head)
	if err != nil {
		return time.Time{}, line
	}
	return t, rest
}

// NamesRequest says whether the router's log line names the request id: requestID=<id> in its
// text logs (quoted when it has to be), "requestID":"<id>" in its JSON logs (--log-json).
func NamesRequest(line, id string) bool {
	if id == "" {
		return false
	}
	quoted, _ := json.Marshal(id)
	for _, token := range []string{
		"requestID=" + id,
		"requestID=" + strconv.Quote(id),
		`"requestID":` + string(quoted),
	} {
		for rest := line; ; {
			at := strings.Index(rest, token)
			if at < 0 {
				break
			}
			before := at == 0 || rest[at-1] == ' ' || rest[at-1] == '{' || rest[at-1] == ','
			after := rest[at+len(token):]
			if before && (after == "" || after[0] == ' ' || after[0] == ',' || after[0] == '}') {
				return true
			}
			rest = rest[at+len(token):]
		}
	}
	return false
}
