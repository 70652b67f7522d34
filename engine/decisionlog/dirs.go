package decisionlog

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// A spool root holds one directory per process, named p-<random>, each
// with a lock file its process holds (flock) while it lives. A process
// claims a new one of its own, and adopts every one it can lock: a
// process gone (killed, or handed over to this one) holds no lock.

const (
	procPrefix = "p-"
	lockName   = "lock"
)

// lockedDir is a process directory whose lock this process holds.
type lockedDir struct {
	path string
	lock *os.File
}

func (d *lockedDir) release() {
	if d.lock != nil {
		_ = d.lock.Close() // closing drops the flock
		d.lock = nil
	}
}

// remove deletes the directory (its spool shipped) and releases it.
func (d *lockedDir) remove() {
	_ = os.RemoveAll(d.path)
	d.release()
}

// claimDirs creates and locks this process's directory under root, and
// locks every other process directory no live process holds.
func claimDirs(root string) (own *lockedDir, orphans []*lockedDir, err error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, nil, err
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), procPrefix) {
			continue
		}
		d, err := tryLock(filepath.Join(root, e.Name()))
		if err != nil {
			continue // a live process's, or unreadable: left alone
		}
		orphans = append(orphans, d)
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	path := filepath.Join(root, procPrefix+hex.EncodeToString(id[:]))
	if err := os.Mkdir(path, 0o700); err != nil {
		releaseAll(orphans)
		return nil, nil, err
	}
	if own, err = tryLock(path); err != nil {
		releaseAll(orphans)
		return nil, nil, err
	}
	return own, orphans, nil
}

// errLocked: another live process holds the directory.
var errLocked = errors.New("locked by another process")

func tryLock(dir string) (*lockedDir, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errLocked
		}
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return &lockedDir{path: dir, lock: f}, nil
}

func releaseAll(ds []*lockedDir) {
	for _, d := range ds {
		d.release()
	}
}
