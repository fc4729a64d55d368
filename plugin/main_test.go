package plugin

import (
	"flag"
	"io"
	"os"
	"testing"

	"github.com/sirupsen/logrus"
)

// TestMain silences the NRI libraries' logging (logrus' standard logger)
// unless -v is given, so benchmark lines stay readable.
func TestMain(m *testing.M) {
	flag.Parse()
	if !testing.Verbose() {
		logrus.StandardLogger().SetOutput(io.Discard)
	}
	os.Exit(m.Run())
}
