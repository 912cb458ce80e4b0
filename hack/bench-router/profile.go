package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// profile is where the pipeline router's CPU goes under load: the top of a CPU profile taken
// from its /debug/pprof/ (--profiling) while callers call it.
type profile struct {
	callers int
	seconds int
	top     string // the output of go tool pprof -top, or why there is none
}

// profileRouter profiles the router r (binary bin) for seconds while callers call it through v.
func profileRouter(ctx context.Context, r *process, bin string, v *variant, body []byte, callers, seconds int) *profile {
	p := &profile{callers: callers, seconds: seconds}
	fmt.Fprintf(os.Stderr, ">> profiling the pipeline router for %ds under %d callers\n", seconds, callers)
	got := make(chan []byte, 1)
	go func() {
		res, err := http.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", r.adminURL, seconds))
		if err != nil {
			got <- nil
			return
		}
		defer func() { _ = res.Body.Close() }()
		data, _ := io.ReadAll(res.Body)
		got <- data
	}()
	v.run(ctx, callers, body, time.Duration(seconds)*time.Second+500*time.Millisecond, nil)
	data := <-got
	if len(data) == 0 {
		p.top = "(no profile: the router did not answer /debug/pprof/profile)"
		return p
	}
	file := filepath.Join(r.dir, "cpu.pprof")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		p.top = "(no profile: " + err.Error() + ")"
		return p
	}
	out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=20", bin, file).Output()
	if err != nil {
		p.top = "(go tool pprof failed: " + err.Error() + ")"
		return p
	}
	// The lines before the table name the files and the build: not needed here.
	if i := bytes.Index(out, []byte("Showing")); i >= 0 {
		out = out[i:]
	}
	p.top = strings.TrimSpace(string(out))
	return p
}

func (p *profile) markdown() string {
	return fmt.Sprintf("\n### %d %s, over %d s\n\n```text\n%s\n```\n", p.callers, callersWord(p.callers), p.seconds, p.top)
}

func callersWord(n int) string {
	if n == 1 {
		return "caller"
	}
	return "callers"
}
