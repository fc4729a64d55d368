package logsink

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
)

// TestNRILoggerOncePerFormat: the NRI library's lines come out in the
// daemon's log, its format (milliseconds), tagged component=nri; a line
// the stub repeats at each reconnect is at info once, then at debug
// (issue 43, item 5).
func TestNRILoggerOncePerFormat(t *testing.T) {
	var out bytes.Buffer
	log := logrus.New()
	log.SetOutput(&out)
	log.SetFormatter(&logrus.TextFormatter{FullTimestamp: true, TimestampFormat: "2006-01-02T15:04:05.000Z07:00"})
	nri := NRILogger(log)
	ctx := context.Background()
	for range 3 {
		nri.Infof(ctx, "Created plugin %s (%s, handles %s)", "10-cpupool", "nri-cpupool", "RunPodSandbox")
	}
	nri.Warnf(ctx, "failed to infer runtime NRI version: %v", "no")
	nri.Warnf(ctx, "failed to infer runtime NRI version: %v", "no")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	assert.Len(t, lines, 3, "one Created plugin at info, both warnings:\n%s", out.String())
	assert.Equal(t, 1, strings.Count(out.String(), "Created plugin"))
	for _, l := range lines {
		assert.Regexp(t, regexp.MustCompile(`^time="\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}`), l, "the daemon's time format")
		assert.Contains(t, l, "component=nri")
	}

	out.Reset()
	log.SetLevel(logrus.DebugLevel)
	nri.Infof(ctx, "Created plugin %s (%s, handles %s)", "10-cpupool", "nri-cpupool", "RunPodSandbox")
	assert.Contains(t, out.String(), "level=debug msg=\"Created plugin 10-cpupool")
}
