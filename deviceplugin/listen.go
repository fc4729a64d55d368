package deviceplugin

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// listenUnix listens on a unix socket readable only by root, creating the
// directory if needed.
func listenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("restricting %s: %w", path, err)
	}
	return l, nil
}
