package main

// The harness as the tests run it: this package built as a test binary (`go test -c`, by
// build.sh), with the CLI of main (`informer TRACE.jsonl`, exit 0 with JSON on stdout, 2
// on a bad trace, 3 on a trace this harness cannot play, 1 when the play fails).
//
// The play runs inside a testing/synctest bubble, so the reflector's clock is virtual: its
// backoffs before a relist (0.8 s doubling to 30 s, jittered), its "very short watch" check
// and the harness's own 1.1 s hold advance as soon as every goroutine of the bubble is
// durably blocked (on the bubble's channels, sync.Cond, timers), and a play takes
// milliseconds however long the reflector waits. Nothing in the bubble reads a file or the
// network: the trace is read before it is entered, the output written after it is left.

import (
	"context"
	"flag"
	"os"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"
)

// The trace, read before the bubble; the play's result, written after it.
var (
	input     []*source
	result    Output
	resultErr error
)

// How long a play may take in real time (the virtual bound is virtualPlayBound).
const realBound = 120 * time.Second

func TestMain(m *testing.M) {
	klog.SetOutput(os.Stderr)
	klog.LogToStderr(false)
	// The trace is the first argument that is not a test flag.
	flag.Parse()
	args := append([]string{os.Args[0]}, flag.Args()...)
	input = load(args)
	_ = flag.Set("test.timeout", realBound.String())
	_ = flag.Set("test.run", "^TestPlay$")
	// The testing package's own report goes to stderr: stdout is the harness's JSON.
	stdout := os.Stdout
	os.Stdout = os.Stderr
	if code := m.Run(); code != 0 {
		os.Exit(1)
	}
	os.Exit(write(stdout, result, resultErr))
}

// TestPlay plays the trace on virtual time.
func TestPlay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// apimachinery's HandleError rate-limits to one error a millisecond, against the
		// time of its last error, which starts as the real time of package init: in the
		// bubble (whose clock starts in 2000) that is decades ahead, and the first error
		// would sleep until then. The same 1 ms limit, on the bubble's clock; the logging
		// handler is kept.
		saved := utilruntime.ErrorHandlers
		defer func() { utilruntime.ErrorHandlers = saved }()
		utilruntime.ErrorHandlers = []utilruntime.ErrorHandler{saved[0], errorBackoff(time.Millisecond)}
		result, resultErr = play(input, virtualPlayBound)
	})
}

// errorBackoff is apimachinery's backoffError (unexported) with its last error time
// taken on the clock of the goroutine that makes it: the call blocks until minPeriod has
// passed since the previous error.
func errorBackoff(minPeriod time.Duration) utilruntime.ErrorHandler {
	var mu sync.Mutex
	last := time.Now()
	return func(context.Context, error, string, ...any) {
		now := time.Now()
		mu.Lock()
		d := now.Sub(last)
		last = time.Now()
		mu.Unlock()
		time.Sleep(minPeriod - d)
	}
}
