package manager

import (
	"fmt"
	"runtime/debug"
	"strconv"
)

// EnvMemoryLimit holds the memory limit of the manager's container in bytes: config/manager
// fills it from the downward API (resourceFieldRef limits.memory).
const EnvMemoryLimit = "MEMORY_LIMIT"

// memoryLimitShare is the part of the container's limit the Go runtime aims to stay under: the
// rest is for memory the runtime does not count (thread stacks of cgo, the binary's pages).
const memoryLimitShare = 0.9

// SetMemoryLimit gives the Go runtime a soft memory limit below the container's, so that the
// garbage collector works harder as the heap nears the limit instead of the kernel killing the
// manager. GOMEMLIMIT, when set, wins (the runtime has applied it). It returns the limit it
// set, 0 when it set none.
func SetMemoryLimit(lookupEnv func(string) (string, bool)) (int64, error) {
	limit, err := softMemoryLimit(lookupEnv)
	if err != nil || limit == 0 {
		return 0, err
	}
	debug.SetMemoryLimit(limit)
	return limit, nil
}

// softMemoryLimit is the soft limit for the environment: 0 when GOMEMLIMIT is set or the
// container has no limit.
func softMemoryLimit(lookupEnv func(string) (string, bool)) (int64, error) {
	if v, ok := lookupEnv("GOMEMLIMIT"); ok && v != "" {
		return 0, nil
	}
	v, ok := lookupEnv(EnvMemoryLimit)
	if !ok || v == "" {
		return 0, nil
	}
	container, err := strconv.ParseInt(v, 10, 64)
	if err != nil || container < 0 {
		return 0, fmt.Errorf("%s=%q is not a number of bytes", EnvMemoryLimit, v)
	}
	// A container without a limit gets the node's allocatable memory through the downward
	// API: a soft limit of that size does no harm.
	return int64(float64(container) * memoryLimitShare), nil
}
