package dra

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestSaveFailuresAreLoggedOnceAMinutePerError: the same failure is logged
// once, again after a minute with the number not logged since; another
// failure is logged at once; a success says how many failed and starts
// anew.
func TestSaveFailuresAreLoggedOnceAMinutePerError(t *testing.T) {
	var f saveFailures
	at := time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC)
	ro, full := errors.New("read-only"), errors.New("no space")
	step := func(err error, after time.Duration) (bool, int) { return f.fail(err, at.Add(after)) }
	log, n := step(ro, 0)
	assert.True(t, log)
	assert.Zero(t, n)
	for i := range 3 {
		log, _ = step(ro, time.Duration(i+1)*time.Second)
		assert.False(t, log, "the same failure within a minute")
	}
	log, n = step(ro, time.Minute)
	assert.True(t, log, "again after a minute")
	assert.Equal(t, 3, n)
	log, n = step(full, time.Minute+time.Second)
	assert.True(t, log, "another failure at once")
	assert.Zero(t, n)
	log, _ = step(ro, time.Minute+2*time.Second)
	assert.True(t, log, "a change back is a change too")
	assert.Equal(t, 7, f.succeed())
	assert.Zero(t, f.succeed())
	log, _ = step(ro, time.Minute+3*time.Second)
	assert.True(t, log, "a new failure after a success")
}
