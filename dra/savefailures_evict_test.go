package dra

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestAForgottenKindsCoalescedFailuresAreSaidByTheNextLine: a kind of
// failure with failures not yet logged ("N more Prepares failed so since
// the last such line") is forgotten when saveFailureKinds other kinds come
// within its minute. Its coalesced failures were said by no line: the line
// that forgets it says them, so every failure is said by one line.
func TestAForgottenKindsCoalescedFailuresAreSaidByTheNextLine(t *testing.T) {
	var f saveFailures
	at := time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC)
	enospc := errors.New("no space left on device")
	said := 0
	step := func(err error, now time.Time) (bool, int) {
		log, unlogged := f.fail(err, now)
		if log {
			said += 1 + unlogged
		}
		return log, unlogged
	}
	log, _ := step(enospc, at)
	assert.True(t, log)
	for i := 1; i <= 5; i++ {
		log, _ = step(enospc, at.Add(time.Duration(i)*time.Second))
		assert.False(t, log)
	}
	for i := range saveFailureKinds - 1 {
		log, unlogged := step(fmt.Errorf("other failure %d", i), at.Add(10*time.Second+time.Duration(i)*time.Millisecond))
		assert.True(t, log)
		assert.Zero(t, unlogged, "nothing forgotten yet")
	}
	log, unlogged := step(errors.New("the kind that forgets ENOSPC"), at.Add(11*time.Second))
	assert.True(t, log)
	assert.Equal(t, 5, unlogged, "the 5 coalesced ENOSPC failures are said by the line that forgets their kind")
	log, unlogged = step(enospc, at.Add(20*time.Second))
	assert.True(t, log, "ENOSPC again is new")
	assert.Zero(t, unlogged, "its coalesced failures were said already")
	assert.Equal(t, said, f.succeed(), "every failure said by one line, and the recovery total counts each")
}
