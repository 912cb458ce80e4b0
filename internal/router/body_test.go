package router

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// unsized hides the length of a reader, as a chunked body does.
type unsized struct{ r io.Reader }

func (u unsized) Read(p []byte) (int, error) { return u.r.Read(p) }

func TestReadBody(t *testing.T) {
	const limit = 100 << 10
	for _, tc := range []struct {
		name    string
		size    int
		known   bool
		wantErr error
	}{
		{"empty", 0, true, nil},
		{"empty, length unknown", 0, false, nil},
		{"small", 10, true, nil},
		{"small, length unknown", 10, false, nil},
		{"at the limit", limit, true, nil},
		{"at the limit, length unknown", limit, false, nil},
		{"over the limit", limit + 1, true, errBodyTooLarge},
		{"over the limit, length unknown", limit + 1, false, errBodyTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := bytes.Repeat([]byte("x"), tc.size)
			var r io.Reader = unsized{bytes.NewReader(data)}
			size := int64(-1)
			if tc.known {
				r, size = bytes.NewReader(data), int64(tc.size)
			}
			bg := &budget{limit: 2 * limit}
			buf, err := readBody(r, size, limit, bg)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if err == nil {
				if !bytes.Equal(buf.Bytes(), data) {
					t.Fatalf("read %d bytes, want %d", len(buf.Bytes()), len(data))
				}
				if held := bg.used.Load(); held < int64(tc.size) || held > limit {
					t.Errorf("the budget counts %d bytes for a body of %d", held, tc.size)
				}
				buf.release()
			}
			if used := bg.used.Load(); used != 0 {
				t.Errorf("%d bytes still counted after release", used)
			}
		})
	}
}

func TestReadBodyRefusesWhatTheBudgetCannotHold(t *testing.T) {
	bg := &budget{limit: 1000}
	held, err := readBody(bytes.NewReader(make([]byte, 600)), 600, 1000, bg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readBody(bytes.NewReader(make([]byte, 600)), 600, 1000, bg); !errors.Is(err, errBudgetExceeded) {
		t.Fatalf("second body: error %v, want errBudgetExceeded", err)
	}
	if _, err := readBody(unsized{bytes.NewReader(make([]byte, 600))}, -1, 1000, bg); !errors.Is(err, errBudgetExceeded) {
		t.Fatalf("second body of unknown length: error %v, want errBudgetExceeded", err)
	}
	held.release()
	if _, err := readBody(bytes.NewReader(make([]byte, 600)), 600, 1000, bg); err != nil {
		t.Fatalf("after release: %v", err)
	}
}
