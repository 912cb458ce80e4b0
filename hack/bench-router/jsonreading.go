package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ndsl-cn/pipeline-operator/internal/router/celjson"
	"github.com/ndsl-cn/pipeline-operator/internal/router/stopwhen"
)

// jsonReading is what reading a step's JSON answer for stopWhen costs the router's reader
// (internal/router/celjson: the decoding's cost counted first, then a CEL value that reads the
// members an expression asks for from the text) against encoding/json decoding it into an any,
// each evaluating benchStopWhen on the answer, in this process (testing.Benchmark).
type jsonReading struct {
	rows []jsonReadingRow
}

type jsonReadingRow struct {
	size             int
	reader           string
	ns, bytes, alloc int64
}

// jsonReaders are the two ways of reading an answer for an expression.
var jsonReaders = []struct {
	name string
	read func(doc []byte) (any, error)
}{
	{"celjson (the router's)", func(doc []byte) (any, error) {
		_ = celjson.DecodeCost(doc)
		return celjson.Value(doc), nil
	}},
	{"encoding/json", func(doc []byte) (any, error) {
		var v any
		err := json.Unmarshal(doc, &v)
		return v, err
	}},
}

func measureJSONReading(sizes []int) (*jsonReading, error) {
	sw, err := stopwhen.Compile(benchStopWhen)
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	jr := &jsonReading{}
	for _, size := range sizes {
		doc := requestBody(size)
		for _, r := range jsonReaders {
			var failed error
			res := testing.Benchmark(func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					v, err := r.read(doc)
					if err == nil {
						_, err = sw.Eval(ctx, stopwhen.Input{Response: v, Status: 200})
					}
					if err != nil {
						failed = err
						b.FailNow()
					}
				}
			})
			if failed != nil {
				return nil, fmt.Errorf("%s on %d bytes: %w", r.name, size, failed)
			}
			jr.rows = append(jr.rows, jsonReadingRow{size: len(doc), reader: r.name, ns: res.NsPerOp(),
				bytes: res.AllocedBytesPerOp(), alloc: res.AllocsPerOp()})
		}
	}
	return jr, nil
}

func (jr *jsonReading) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Reading an answer for stopWhen\n\nWhat reading one JSON answer of a step and evaluating `%s` "+
		"on it costs, per answer, in the benchmark's process once nothing else of it runs (`testing.Benchmark`): the router's "+
		"reader (`internal/router/celjson`, which counts what decoding would hold, then gives the expression a value that "+
		"reads the members it asks for from the text) against `encoding/json` decoding the answer into an `any`. The "+
		"answers are documents of the benchmark's shape, `{\"items\": [...]}`.\n\n", benchStopWhen)
	b.WriteString("| answer | reader | time | allocated | allocations | time / encoding/json |\n|---|---|---|---|---|---|\n")
	base := map[int]int64{}
	for _, r := range jr.rows {
		if r.reader == "encoding/json" {
			base[r.size] = r.ns
		}
	}
	for _, r := range jr.rows {
		ratio := ""
		if base[r.size] > 0 {
			ratio = fmt.Sprintf("%.2f", float64(r.ns)/float64(base[r.size]))
		}
		fmt.Fprintf(&b, "| %s | %s | %.1f µs | %s | %d | %s |\n", byteSize(int64(r.size)), r.reader, float64(r.ns)/1e3,
			byteSize(r.bytes), r.alloc, ratio)
	}
	return b.String()
}

// byteSize is n bytes in B, KiB or MiB.
func byteSize(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return mib(n)
}
