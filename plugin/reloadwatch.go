package plugin

// What asks for a config reload in the daemon: SIGHUP (which `systemctl
// reload` sends: ExecReload= in the unit) and the config file changing.
// The file's directory is watched, not the file: an editor saves by
// renaming a new file over the old one, and a Kubernetes ConfigMap volume
// swaps a symlink (..data) in the directory, and a watch on the file
// itself sees neither. Events come in bursts (write, chmod, rename), so a
// reload waits until the directory has been quiet for ConfigDebounce, and
// one whose file reads as the last one read is skipped.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/cpupool/nri-cpupool/config"
)

// ConfigDebounce is how long the config file's directory must be quiet
// before a change is reloaded.
const ConfigDebounce = 200 * time.Millisecond

// The sources of a reload, as status and the log name them.
const (
	reloadSourceSignal = "SIGHUP"
	reloadSourceFile   = "file changed"
)

// WatchConfig reloads the config at path whenever hup delivers and
// whenever the file changes, until ctx ends. load reads and parses it as
// the daemon did at start (flags applied); the plugin's lock is not held
// meanwhile.
func (p *Plugin) WatchConfig(ctx context.Context, path string, hup <-chan os.Signal, load func() (*config.Config, error)) {
	last, _ := os.ReadFile(path)
	// A reload is timed from its trigger: the signal, or the first event
	// of the burst that ended quiet (the save), so that the debounce is
	// part of the measure.
	reload := func(source string, trigger time.Time) {
		data, _ := os.ReadFile(path)
		if source == reloadSourceFile && bytes.Equal(data, last) {
			return // touched, or its directory changed around it
		}
		last = data
		cfg, err := load()
		p.reload(cfg, err, source, trigger) // counted, logged and shown in status
	}
	var burst time.Time // the first event since the last reload, zero if none
	var events <-chan fsnotify.Event
	var errs <-chan error
	w, err := watchDir(filepath.Dir(path))
	if err != nil {
		p.log.Warnf("config: not watching %s for changes (%v); reload it with SIGHUP (systemctl reload nri-cpupool)", path, err)
	} else {
		defer w.Close()
		events, errs = w.Events, w.Errors
	}
	quiet := time.NewTimer(time.Hour)
	quiet.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			trigger := time.Now()
			p.log.Infof("config: SIGHUP: reloading %s", path)
			reload(reloadSourceSignal, trigger)
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if ev.Op == fsnotify.Chmod && filepath.Base(ev.Name) != filepath.Base(path) {
				continue
			}
			if burst.IsZero() {
				burst = time.Now()
			}
			quiet.Reset(ConfigDebounce)
		case <-quiet.C:
			trigger := burst
			burst = time.Time{}
			reload(reloadSourceFile, trigger)
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			p.log.Warnf("config: watching %s: %v", path, err)
		}
	}
}

func watchDir(dir string) (*fsnotify.Watcher, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("making a watcher: %w", err)
	}
	if err := w.Add(dir); err != nil {
		w.Close()
		return nil, fmt.Errorf("watching %s: %w", dir, err)
	}
	return w, nil
}
