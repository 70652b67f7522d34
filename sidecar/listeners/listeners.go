// Package listeners opens the sidecar's named listening sockets and hands
// them over to the next image of the process, so that a restart never
// closes a listening socket: connections that arrive while one image
// drains and the next starts wait in the kernel's accept queue instead of
// being refused.
//
// The handover travels in one environment variable, EnvVar, whose value
// lists "name=fd@address" entries separated by ";": the name of the
// listener (such as "grpc" or "http"), the descriptor number the process
// inherits, and the configured address it was opened for. A listener is
// taken over only when the configuration still names the same address;
// otherwise a new socket is opened and the inherited one closed.
package listeners

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// EnvVar carries inherited listening sockets into a new process image.
const EnvVar = "SVC_LISTEN_FDS"

// Set opens named listeners, taking over inherited ones, and remembers
// every listener it opened for a handover. It is safe for concurrent use.
type Set struct {
	mu         sync.Mutex
	inherited  map[string]inherited
	open       map[string]opened
	tookOver   bool
	socketMode os.FileMode
}

type inherited struct {
	file *os.File
	addr string
}

type opened struct {
	l    net.Listener
	addr string
}

// New returns a Set that inherits the listeners described by value (the
// content of EnvVar; "" for none).
func New(value string) (*Set, error) {
	s := &Set{inherited: map[string]inherited{}, open: map[string]opened{}, socketMode: DefaultSocketMode}
	if value == "" {
		return s, nil
	}
	// Parse everything before adopting any descriptor, so that a
	// malformed value never closes a descriptor it does not own.
	fds := map[string]int{}
	addrs := map[string]string{}
	for entry := range strings.SplitSeq(value, ";") {
		name, rest, ok1 := strings.Cut(entry, "=")
		fdText, addr, ok2 := strings.Cut(rest, "@")
		fd, err := strconv.Atoi(fdText)
		if !ok1 || !ok2 || name == "" || err != nil || fd < 3 {
			return nil, fmt.Errorf("%s: malformed entry %q: want name=fd@address", EnvVar, entry)
		}
		if _, dup := fds[name]; dup {
			return nil, fmt.Errorf("%s: listener %q given twice", EnvVar, name)
		}
		fds[name], addrs[name] = fd, addr
	}
	for name, fd := range fds {
		s.inherited[name] = inherited{file: os.NewFile(uintptr(fd), name), addr: addrs[name]}
	}
	return s, nil
}

// SetSocketMode sets the file mode of the Unix sockets Listen creates.
func (s *Set) SetSocketMode(mode os.FileMode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.socketMode = mode
}

// TookOver reports whether Listen took over at least one inherited
// listener: this image continues a previous one.
func (s *Set) TookOver() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tookOver
}

// takenOver wraps a listener built from an inherited descriptor. For a
// Unix socket, unixPath is the configured path: the kernel's name of the
// socket is the private path it was bound to (see Open).
type takenOver struct {
	net.Listener
	unixPath string
}

func (t *takenOver) Addr() net.Addr {
	if t.unixPath != "" {
		return &net.UnixAddr{Name: t.unixPath, Net: "unix"}
	}
	return t.Listener.Addr()
}

// Listen returns the listener called name for addr: the inherited one
// when the previous image handed over a listener of that name for the
// same configured address, else a new one (see Open).
func (s *Set) Listen(name, addr string) (net.Listener, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.open[name]; dup {
		return nil, fmt.Errorf("listener %q opened twice", name)
	}
	var l net.Listener
	if in, ok := s.inherited[name]; ok && in.addr == addr {
		delete(s.inherited, name)
		fl, err := net.FileListener(in.file)
		in.file.Close() // FileListener holds its own duplicate
		if err != nil {
			return nil, fmt.Errorf("inherited listener %q (%s): %w", name, addr, err)
		}
		path, _ := strings.CutPrefix(addr, UnixScheme)
		if path == addr {
			path = ""
		}
		l = &takenOver{Listener: fl, unixPath: path}
		s.tookOver = true
	} else {
		var err error
		if l, err = Open(addr, s.socketMode); err != nil {
			return nil, err
		}
	}
	s.open[name] = opened{l: l, addr: addr}
	return l, nil
}

// Forget drops a listener the caller closed without serving it, so that
// it is not handed over.
func (s *Set) Forget(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.open, name)
}

// Close closes inherited descriptors no listener took over (the
// configuration moved to another address). Call it once every listener
// is open.
func (s *Set) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, in := range s.inherited {
		in.file.Close()
		delete(s.inherited, name)
	}
}

// Handover duplicates every open listener's socket into a descriptor
// that survives exec and returns the files (keep them referenced until
// exec: closing or collecting them closes the descriptors) and the value
// of EnvVar describing them. The listeners themselves may then be closed:
// the duplicates keep the sockets listening.
func (s *Set) Handover() ([]*os.File, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var files []*os.File
	var entries []string
	names := make([]string, 0, len(s.open))
	for name := range s.open {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		o := s.open[name]
		l := o.l
		if t, ok := l.(*takenOver); ok {
			l = t.Listener
		}
		fl, ok := l.(interface{ File() (*os.File, error) })
		if !ok {
			closeAll(files)
			return nil, "", fmt.Errorf("listener %q (%T) cannot be handed over", name, l)
		}
		if ul, ok := l.(interface{ SetUnlinkOnClose(bool) }); ok {
			// The socket file must outlive this image's Close.
			ul.SetUnlinkOnClose(false)
		}
		f, err := fl.File()
		if err != nil {
			closeAll(files)
			return nil, "", fmt.Errorf("listener %q: %w", name, err)
		}
		if err := keepOnExec(f); err != nil {
			f.Close()
			closeAll(files)
			return nil, "", fmt.Errorf("listener %q: %w", name, err)
		}
		files = append(files, f)
		entries = append(entries, fmt.Sprintf("%s=%d@%s", name, f.Fd(), o.addr))
	}
	if len(files) == 0 {
		return nil, "", errors.New("no listener to hand over")
	}
	return files, strings.Join(entries, ";"), nil
}

// keepOnExec clears FD_CLOEXEC, which Go sets on every descriptor it
// creates.
func keepOnExec(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		_, _, errno := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_SETFD, 0)
		if errno != 0 {
			serr = errno
		}
	}); err != nil {
		return err
	}
	return serr
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// UnixScheme prefixes a listen address that is a Unix domain socket path:
// "unix:///run/svc/grpc.sock".
const UnixScheme = "unix://"

// DefaultSocketMode is the file mode of Unix sockets unless set.
const DefaultSocketMode os.FileMode = 0o660

// Open listens on addr: host:port over TCP, or unix:///path on a Unix
// domain socket whose file gets mode. A socket file left by a process
// that is gone is replaced; one that still accepts connections, or any
// other file at the path, is an error, as a TCP port in use is.
//
// The socket file never exists with a broader mode than mode: bind(2)
// creates it with the process umask's mode, so it is bound inside a
// directory of its own with mode 0700 next to path (which no other user
// can enter), chmod-ed there, and only then linked to path. The process
// umask is left alone: it is process-wide, and changing it around the
// bind would race with every other goroutine creating files.
func Open(addr string, mode os.FileMode) (net.Listener, error) {
	path, ok := strings.CutPrefix(addr, UnixScheme)
	if !ok {
		return net.Listen("tcp", addr)
	}
	if st, err := os.Lstat(path); err == nil && st.Mode()&os.ModeSocket != 0 {
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil, fmt.Errorf("listen unix %s: address already in use", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
		}
	}
	return listenPrivate(path, mode)
}

// maxSocketPath is the longest path a Unix socket address holds on Linux
// (sun_path is 108 bytes with its terminating NUL).
const maxSocketPath = 107

// afterBind, when set by a test, is called with the path the socket was
// bound to, right after the bind.
var afterBind func(bound string)

// listenPrivate binds a Unix socket in a fresh 0700 directory beside
// path, sets its mode there and links it to path. link(2), unlike
// rename(2), fails when path exists, so a file created at path meanwhile
// is never replaced.
func listenPrivate(path string, mode os.FileMode) (net.Listener, error) {
	dir, err := os.MkdirTemp(filepath.Dir(path), ".s")
	if err != nil {
		return nil, fmt.Errorf("listen unix %s: private directory: %w", path, err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("listen unix %s: private directory: %w", path, err)
	}
	bound := filepath.Join(dir, "s")
	if len(bound) > maxSocketPath {
		return nil, fmt.Errorf("listen unix %s: the directory is too deep: the socket is first bound at %s, %d bytes, over the %d a Unix socket address holds",
			path, bound, len(bound), maxSocketPath)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: bound, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen unix %s: %w", path, err)
	}
	l.SetUnlinkOnClose(false)
	if afterBind != nil {
		afterBind(bound)
	}
	if err := os.Chmod(bound, mode); err != nil {
		l.Close()
		return nil, fmt.Errorf("socket mode of %s: %w", path, err)
	}
	if err := os.Link(bound, path); err != nil {
		l.Close()
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("listen unix %s: address already in use", path)
		}
		return nil, fmt.Errorf("listen unix %s: %w", path, err)
	}
	ul := &unixListener{UnixListener: l, path: path}
	ul.unlink.Store(true)
	return ul, nil
}

// unixListener is a Unix socket listener whose file is at path, not at
// the private path it was bound to: Addr names path, and Close removes
// path unless SetUnlinkOnClose(false) said otherwise (a handover).
type unixListener struct {
	*net.UnixListener
	path   string
	unlink atomic.Bool
	once   sync.Once
}

func (l *unixListener) Addr() net.Addr { return &net.UnixAddr{Name: l.path, Net: "unix"} }

// SetUnlinkOnClose says whether Close removes the socket file.
func (l *unixListener) SetUnlinkOnClose(unlink bool) { l.unlink.Store(unlink) }

func (l *unixListener) Close() error {
	err := l.UnixListener.Close()
	l.once.Do(func() {
		if l.unlink.Load() {
			os.Remove(l.path)
		}
	})
	return err
}
