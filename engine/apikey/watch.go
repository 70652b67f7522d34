package apikey

import (
	"crypto/sha256"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// File is api_keys.file kept current: the Set last read from it, and why
// the last change was refused, if it was. Reload replaces the Set only
// with a file that parses: a refused file leaves the keys of the previous
// one in force.
type File struct {
	path string
	set  atomic.Pointer[Set]

	mu sync.Mutex // serializes Reload
	// sum, size and mtime are of the content last read, accepted or
	// refused: a refused file is refused (and counted) once.
	sum      [sha256.Size]byte
	size     int64
	mtime    time.Time
	status   atomic.Pointer[Status]
	refusals atomic.Int64
}

// Status describes the key file for status endpoints.
type Status struct {
	// Path is api_keys.file.
	Path string `json:"path"`
	// Keys is the number of entries in force.
	Keys int `json:"keys"`
	// Loaded is when the keys in force were read.
	Loaded time.Time `json:"loaded"`
	// Refusals counts the changes of the file refused since the start.
	Refusals int64 `json:"refusals"`
	// LastError is why the latest change was refused; empty once a
	// change is accepted.
	LastError string `json:"last_error,omitempty"`
}

// Open reads path. A file that cannot be read or parsed is an error: a
// start with a bad key file is refused.
func Open(path string, now time.Time) (*File, error) {
	f := &File{path: path}
	if _, err := f.reload(now, true); err != nil {
		return nil, err
	}
	return f, nil
}

// Set returns the keys in force.
func (f *File) Set() *Set { return f.set.Load() }

// Status returns the file's state.
func (f *File) Status() Status {
	s := *f.status.Load()
	s.Refusals = f.refusals.Load()
	return s
}

// Reload re-reads the file when its size, modification time or content
// changed, and reports whether a new Set is in force. A file that cannot
// be read or parsed is refused with an error and counted; the previous
// keys stay in force.
func (f *File) Reload(now time.Time) (bool, error) {
	return f.reload(now, false)
}

func (f *File) reload(now time.Time, first bool) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	set, err := f.read(first)
	if err != nil {
		if !first {
			f.refusals.Add(1)
			st := *f.status.Load()
			st.LastError = err.Error()
			f.status.Store(&st)
		}
		return false, err
	}
	if set == nil {
		return false, nil
	}
	f.set.Store(set)
	f.status.Store(&Status{Path: f.path, Keys: set.Len(), Loaded: now})
	return true, nil
}

// read parses the file, or returns a nil Set when its content is the
// one last read.
func (f *File) read(first bool) (*Set, error) {
	fi, err := os.Stat(f.path)
	if err != nil {
		return nil, fmt.Errorf("api key file: %w", err)
	}
	if !first && fi.Size() == f.size && fi.ModTime().Equal(f.mtime) {
		return nil, nil
	}
	data, err := os.ReadFile(f.path)
	if err != nil {
		return nil, fmt.Errorf("api key file: %w", err)
	}
	sum := sha256.Sum256(data)
	f.size, f.mtime = fi.Size(), fi.ModTime()
	if !first && sum == f.sum {
		return nil, nil
	}
	f.sum = sum
	set, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("api key file %s: %w", f.path, err)
	}
	return set, nil
}
