package faults

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

// result is what a case reports.
type result struct {
	title    string
	load     string // what the operator was doing when the fault came
	faults   string // what it survived
	lost     int    // writes lost; -1 when the case did not get as far as counting
	converge string // the time to converge, and from when
	details  []string
	failures []string
	duration time.Duration
	passed   bool
}

// report is the suite's figures, as docs/reliability.md.
type report struct {
	started, ended time.Time
	load, endLoad  string
	results        []*result
}

// loadAverage is the machine's 1, 5 and 15 minute load averages.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " / ")
}

func (r *report) markdown() string {
	var b strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "# Reliability\n\nMeasured by `make test-faults` on %s (%s/%s, %d CPUs, %s), %s, in %s.\n",
		host, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), r.started.UTC().Format("2006-01-02 15:04 UTC"),
		r.ended.Sub(r.started).Round(time.Second))
	fmt.Fprintf(&b, "Load average (1 / 5 / 15 min) %s at the start, %s at the end", r.load, r.endLoad)
	if note := os.Getenv("FAULTS_NOTE"); note != "" {
		fmt.Fprintf(&b, "; %s", note)
	}
	b.WriteString(".\n")
	b.WriteString(`
Each case starts its own kube-apiserver and etcd (envtest), runs the operator, loads it and
breaks something. The Pipelines have NFS storage and three steps; of every four, one enables
the router, one autoscales a step and one pins a step to a node with a fallback node (the
injected-errors case loads plain Pipelines only). No built-in
controller runs there: the suite plays the deployment controller (every Deployment of the
operator becomes available for its generation), the volume binder (claims and volumes become
Bound) and the kubelets of two Ready nodes, so a converged Pipeline is ` + "`Running`" + ` with every step ready.
When kube-apiserver or etcd come back, the simulated controllers start afresh, so that the
figure is the operator's and not their informers' backoff.

Where the manager is restarted or killed, it runs as its image does: the binary of ` + "`./cmd`" + ` with
` + "`--leader-elect`" + ` and the default lease (15 s lease, 10 s renew deadline), started again 1 s after it
exits, as the kubelet restarts a container (whose backoff starts at 10 s). A new process waits
for the Lease of the one before to expire. The injected-errors, drift and delete cases run the
manager in the test's process, with its connection wrapped.

- **converged**: every Pipeline the suite created exists, carries the status of its generation
  (` + "`observedGeneration`" + `, ` + "`Available`" + ` and ` + "`Reconciled`" + ` True, not ` + "`Degraded`" + `) and is ` + "`Running`" + `, and
  has exactly its children — its PersistentVolume (live List of the cluster's volumes) and
  claim, one Deployment and one Service per step, each with its spec's image, model, Pipeline
  and labels, the router's ConfigMap, Deployment and Service, the autoscaler, the steps'
  NetworkPolicy, controlled by it —
  and nothing else exists; then nothing changes for 3 s. No
  Pipeline ever reported ` + "`NameConflict`" + ` (status or event): nobody else's object takes a child's name here.
- **writes lost**: Pipelines the apiserver accepted that are missing at the end, plus children
  a converged Pipeline's spec asks for that are missing; for deletes, Pipelines still there
  after their delete. 0 is the only passing value.
- **time to converge**: from the moment given (the fault's end, or the start of the load) to
  the first check that found everything converged; checks run every 0.5 s.
- Figures are measurements of one run on a shared machine; the assertions are about
  correctness, with deadlines of minutes, never about these times.

| case | load held | faults survived | writes lost | time to converge | result |
|---|---|---|---|---|---|
`)
	for _, res := range r.results {
		lost := "not counted"
		if res.lost >= 0 {
			lost = fmt.Sprint(res.lost)
		}
		verdict := "passed"
		if !res.passed {
			verdict = "**failed**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", res.title, cell(res.load), cell(res.faults), lost, cell(res.converge), verdict)
	}
	for _, res := range r.results {
		fmt.Fprintf(&b, "\n## %s\n\n", res.title)
		for _, d := range res.details {
			fmt.Fprintf(&b, "- %s\n", d)
		}
		fmt.Fprintf(&b, "- case duration: %s\n", res.duration.Round(100*time.Millisecond))
		if len(res.failures) > 0 {
			b.WriteString("\nFailed:\n\n")
			for _, f := range res.failures {
				fmt.Fprintf(&b, "- %s\n", strings.ReplaceAll(f, "\n", " "))
			}
		}
	}
	b.WriteString("\nReproduce with `make test-faults` (figures printed), or `make test-faults FAULTS_OUTPUT=docs/reliability.md`.\n")
	return b.String()
}

// cell makes text fit in a table cell.
func cell(s string) string {
	if s == "" {
		return "–"
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", "\\|"), "\n", " ")
}
