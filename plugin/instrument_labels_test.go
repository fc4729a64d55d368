package plugin

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/cpupool/nri-cpupool/internal/proflabel"
)

// TestInstrumentedLabelsEveryHandler: a handler the wrapper serves without
// a made label set would run unlabelled (the zero Set), and a profile
// would put its CPU with the runtime connection's: every handler method
// of every stub interface the wrapper implements has its name in
// handlerNames.
func TestInstrumentedLabelsEveryHandler(t *testing.T) {
	wrapper := reflect.TypeFor[instrumented]()
	for _, iface := range stubHandlers {
		if !wrapper.Implements(iface) {
			continue
		}
		for m := range iface.Methods() {
			assert.Contains(t, handlerNames, m.Name, "%s: no label set made for it", iface.Name())
		}
	}
}

// TestInstrumentedLabelsWithoutAllocating: the wrapper is on every reply
// path, and the allocation tests (TestCreationAllocationsFlat,
// BenchmarkCreateContainerAllocs) call the plugin's handlers directly,
// not through it: labelling a handler must add no allocation to timing
// it (a label set made per call, or a closure that escapes, would).
func TestInstrumentedLabelsWithoutAllocating(t *testing.T) {
	handlers := map[string]handlerEntry{}
	for i, name := range handlerNames {
		handlers[name] = handlerEntry{labels: proflabel.NRI(name), index: i}
	}
	in := instrumented{seconds: newHandlerSeconds(), handlers: handlers, inflight: &handlersInFlight{}}
	ctx := context.Background()
	var runs int
	in.observe("CreateContainer", time.Now()) // the histogram's series made
	timed := testing.AllocsPerRun(200, func() { in.observe("CreateContainer", time.Now()) })
	served := testing.AllocsPerRun(200, func() { in.serve(ctx, "CreateContainer", func() { runs++ }) })
	assert.Equal(t, timed, served, "allocations per call, timed alone / timed and labelled")
	assert.Positive(t, runs)
}
