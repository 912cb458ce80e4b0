package manager

import "testing"

func TestSoftMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want int64
		err  bool
	}{
		{name: "no limit", env: map[string]string{}, want: 0},
		{name: "the container's 256Mi", env: map[string]string{EnvMemoryLimit: "268435456"}, want: 241591910},
		{name: "GOMEMLIMIT wins", env: map[string]string{EnvMemoryLimit: "268435456", "GOMEMLIMIT": "100MiB"}, want: 0},
		{name: "empty", env: map[string]string{EnvMemoryLimit: ""}, want: 0},
		{name: "not bytes", env: map[string]string{EnvMemoryLimit: "256Mi"}, err: true},
		{name: "negative", env: map[string]string{EnvMemoryLimit: "-1"}, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := softMemoryLimit(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if (err != nil) != tc.err || got != tc.want {
				t.Errorf("softMemoryLimit = %d, %v; want %d, error %v", got, err, tc.want, tc.err)
			}
		})
	}
}
