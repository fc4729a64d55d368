package drarun

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestEventsHost (review 59, L6): with no node name configured, the
// Events' source host is the hostname as the kubelet's default node name
// takes it, not empty; a configured name wins; no hostname says how to fix.
func TestEventsHost(t *testing.T) {
	hostname := func() (string, error) { return " Node-A.example\n", nil }
	host, from := eventsHost("worker-7", hostname)
	assert.Equal(t, "worker-7", host)
	assert.Contains(t, from, "kubernetes.nodeName")

	host, from = eventsHost("", hostname)
	assert.Equal(t, "node-a.example", host)
	assert.Contains(t, from, "the hostname")

	host, from = eventsHost("", func() (string, error) { return "", errors.New("no uts") })
	assert.Empty(t, host)
	assert.Contains(t, from, "set kubernetes.nodeName")
}
