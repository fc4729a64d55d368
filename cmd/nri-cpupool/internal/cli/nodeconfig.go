package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/cpupool/nri-cpupool/config"
)

// The commands that act for the node's daemon or read what it wrote (run,
// validate, status, audit, explain) read the node's config as run does:
// the default file when no --config is given, and the built-in defaults
// when that file is absent. Their state file, proc root, housekeeping and
// kernel work settings are then the daemon's, not the defaults' (review
// 58, item 7: audit and explain read the defaults unless given --config,
// and status had no --config).

// configFlag defines such a command's --config flag, with run's default.
func configFlag(fs *flag.FlagSet, usage string) *string {
	return fs.String("config", config.DefaultPath, usage)
}

// loadRunConfig reads the config; only the default path may be absent.
func loadRunConfig(path string) (*config.Config, error) {
	if _, err := os.Stat(path); os.IsNotExist(err) && path == config.DefaultPath {
		return config.Default(), nil
	}
	return config.Load(path)
}

// readNodeConfig is loadRunConfig for the commands that read what the
// daemon wrote (status, audit, explain). They are what an operator runs
// when the daemon does not start, often because its config is refused,
// so a config that cannot be parsed or fails its checks is a warning on
// stderr, and the command goes on with the built-in defaults and its
// flags (--state-file and the roots choose what the defaults would miss).
// A --config file that does not exist is an error, as for run: a mistyped
// path.
func readNodeConfig(path string, stderr io.Writer) (*config.Config, error) {
	cfg, err := loadRunConfig(path)
	switch {
	case err == nil:
		return cfg, nil
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.EISDIR):
		return nil, err
	}
	d := config.Default()
	fmt.Fprintf(stderr, "warning: the node's config is refused, so this reads with the built-in defaults and the flags: %v\n"+
		"warning: the defaults' state file %s, proc root %s and cgroup root %s unless flags say otherwise, and housekeeping and kernel work off: what depends on the daemon's own settings may differ from what it does\n",
		err, d.StateFile, d.ProcRoot, d.CgroupRoot)
	return d, nil
}
