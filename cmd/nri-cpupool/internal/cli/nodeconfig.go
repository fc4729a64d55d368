package cli

import (
	"flag"
	"os"

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
