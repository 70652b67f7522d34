package harness

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// StopTimeout bounds how long a process may take to exit after SIGTERM.
const StopTimeout = 20 * time.Second

// Buffer is a concurrency-safe output buffer with a way to wait for
// content to appear in it.
type Buffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

// NewBuffer returns an empty Buffer.
func NewBuffer() *Buffer { return &Buffer{changed: make(chan struct{})} }

// Write implements io.Writer.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	close(b.changed)
	b.changed = make(chan struct{})
	return n, err
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// wait returns the content and a channel closed on the next write.
func (b *Buffer) wait() (string, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String(), b.changed
}

// Process is a child process whose stdout and stderr are captured.
type Process struct {
	// Name labels the process in test logs.
	Name string
	// Stdout and Stderr receive the process's output.
	Stdout, Stderr *Buffer

	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
	stopped sync.Once
	code    int
}

// StartProcess starts cmd, capturing its output. When the test ends the
// process is stopped if it still runs, and its output is written to the
// test log if the test failed.
func StartProcess(t testing.TB, name string, cmd *exec.Cmd) *Process {
	t.Helper()
	p := &Process{Name: name, Stdout: NewBuffer(), Stderr: NewBuffer(), cmd: cmd, done: make(chan struct{})}
	cmd.Stdout = p.Stdout
	cmd.Stderr = p.Stderr
	// A process group of its own, so that a stop reaches the workers a
	// server may have forked.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill(t)
		if t.Failed() || Verbose() {
			p.LogOutput(t)
		}
	})
	return p
}

// Verbose reports whether E2E_VERBOSE is set: then the output of every
// process is written to the test log, also when the test passes.
func Verbose() bool { return os.Getenv("E2E_VERBOSE") != "" }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Pid returns the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// ExitCode returns the exit code once the process has exited: -1 when a
// signal ended it.
func (p *Process) ExitCode() int {
	<-p.done
	var ee *exec.ExitError
	if errors.As(p.waitErr, &ee) {
		return ee.ExitCode()
	}
	if p.waitErr != nil {
		return -1
	}
	return 0
}

// Signal sends sig to the process.
func (p *Process) Signal(sig syscall.Signal) error {
	select {
	case <-p.done:
		return errors.New("process already exited")
	default:
	}
	return p.cmd.Process.Signal(sig)
}

// Stop sends SIGTERM and waits for the exit, killing the process group
// when it takes longer than StopTimeout. It returns the exit code, -1 when
// a signal ended the process. Calling it again returns the same code.
func (p *Process) Stop(t testing.TB) int {
	t.Helper()
	p.stopped.Do(func() {
		_ = p.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
			p.code = p.ExitCode()
		case <-time.After(StopTimeout):
			t.Errorf("%s did not exit within %s of SIGTERM; killing it", p.Name, StopTimeout)
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
			p.code = -1
		}
	})
	return p.code
}

// Wait waits up to timeout for the process to exit by itself and returns
// its exit code. It fails the test (and kills the process) on time-out.
func (p *Process) Wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.ExitCode()
	case <-time.After(timeout):
		t.Errorf("%s still running after %s", p.Name, timeout)
		p.kill(t)
		return -1
	}
}

// kill ends the process group if the process still runs.
func (p *Process) kill(t testing.TB) {
	select {
	case <-p.done:
		return
	default:
	}
	p.Stop(t)
	// Children that outlived their parent (never expected) go too.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

// WaitOutput waits until match reports true for the process's stdout (or
// stderr, when fromStderr), the process exits, or the timeout passes.
func (p *Process) WaitOutput(t testing.TB, fromStderr bool, timeout time.Duration, match func(string) bool) (string, error) {
	t.Helper()
	b := p.Stdout
	if fromStderr {
		b = p.Stderr
	}
	deadline := time.After(timeout)
	for {
		s, changed := b.wait()
		if match(s) {
			return s, nil
		}
		select {
		case <-changed:
		case <-p.done:
			s, _ := b.wait()
			if match(s) {
				return s, nil
			}
			return s, fmt.Errorf("%s exited with code %d before its output was ready", p.Name, p.ExitCode())
		case <-deadline:
			return s, fmt.Errorf("%s: output not ready after %s", p.Name, timeout)
		}
	}
}

// LogOutput writes the process's output to the test log.
func (p *Process) LogOutput(t testing.TB) {
	t.Helper()
	for _, o := range []struct {
		name string
		b    *Buffer
	}{{"stdout", p.Stdout}, {"stderr", p.Stderr}} {
		s := strings.TrimRight(o.b.String(), "\n")
		if s == "" {
			continue
		}
		const limit = 64 << 10
		if len(s) > limit {
			s = "…" + s[len(s)-limit:]
		}
		t.Logf("%s %s:\n%s", p.Name, o.name, s)
	}
}
