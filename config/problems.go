package config

import (
	"fmt"
	"strings"
)

// Problem is one finding about a configuration, tied to its key path.
type Problem struct {
	Key     string `json:"key"`
	Message string `json:"message"`
	Warning bool   `json:"warning,omitempty"`
}

func (p Problem) String() string {
	kind := "error"
	if p.Warning {
		kind = "warning"
	}
	return fmt.Sprintf("%s: %s: %s", kind, p.Key, p.Message)
}

// Problems collects findings; as an error it lists every one.
type Problems []Problem

// Errorf records an error at key.
func (ps *Problems) Errorf(key, format string, args ...any) {
	*ps = append(*ps, Problem{Key: key, Message: fmt.Sprintf(format, args...)})
}

// Warnf records a warning at key.
func (ps *Problems) Warnf(key, format string, args ...any) {
	*ps = append(*ps, Problem{Key: key, Message: fmt.Sprintf(format, args...), Warning: true})
}

// HasErrors tells whether any finding is an error.
func (ps Problems) HasErrors() bool { return len(ps.Errors()) > 0 }

// Errors keeps the errors only.
func (ps Problems) Errors() Problems { return ps.filter(false) }

// Warnings keeps the warnings only.
func (ps Problems) Warnings() Problems { return ps.filter(true) }

func (ps Problems) filter(warning bool) Problems {
	var out Problems
	for _, p := range ps {
		if p.Warning == warning {
			out = append(out, p)
		}
	}
	return out
}

// In wraps the findings as an error naming the file they came from.
func (ps Problems) In(file string) error { return &FileError{File: file, Problems: ps} }

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// FileError is a list of problems found in one configuration file.
type FileError struct {
	File     string
	Problems Problems
}

func (e *FileError) Error() string {
	return fmt.Sprintf("invalid config %s:\n  %s", e.File, strings.ReplaceAll(e.Problems.Error(), "\n", "\n  "))
}
