package hostfiles

import (
	"maps"
	"slices"
	"sync"

	"github.com/sirupsen/logrus"
)

// Warnings logs a Source's warnings once per topic while they stay the
// same, and lists those still in force (a Source's Problems, for status).
// A Source warns from the reconciler's goroutine and is asked for its
// problems from anywhere, so Warnings is safe for concurrent use.
type Warnings struct {
	log *logrus.Logger

	mu    sync.Mutex
	byKey map[string]string
}

// NewWarnings returns an empty set that logs to log.
func NewWarnings(log *logrus.Logger) *Warnings {
	return &Warnings{log: log, byKey: map[string]string{}}
}

// Once logs msg as the warning of key, unless it is key's warning already.
func (w *Warnings) Once(key, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byKey[key] == msg {
		return
	}
	w.byKey[key] = msg
	w.log.Warn(msg)
}

// Clear ends key's warning: the next one is logged again.
func (w *Warnings) Clear(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.byKey, key)
}

// Retain ends the warnings whose keys keep refuses.
func (w *Warnings) Retain(keep func(key string) bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	maps.DeleteFunc(w.byKey, func(key, _ string) bool { return !keep(key) })
}

// List is the warnings in force, sorted.
func (w *Warnings) List() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Sorted(maps.Values(w.byKey))
}
