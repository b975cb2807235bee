// Package testenv starts the real processes the tests run against: a
// nats-server 2.15 with JetStream, the dagnats-leases gateway, and
// PostgreSQL, each on a free loopback port with a temporary directory, and
// stops them after. A missing binary fails the test with a message naming
// the setting that points at it; nothing is ever skipped.
package testenv

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// TB is what the fixtures need of testing.TB, so TestMain can use them too.
type TB interface {
	Helper()
	Fatalf(format string, args ...interface{})
	Logf(format string, args ...interface{})
	Cleanup(func())
}

// RepoRoot is the checkout this module lives in: the nearest directory up
// from here with a Cargo.toml and clients/go.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if fileExists(filepath.Join(dir, "Cargo.toml")) && fileExists(filepath.Join(dir, "clients", "go", "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no dagnats-leases checkout above the working directory")
		}
		dir = parent
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// binary is the program setting names, or the default under the checkout.
func binary(setting, underRoot string) (string, error) {
	path := os.Getenv(setting)
	if path == "" {
		root, err := RepoRoot()
		if err != nil {
			return "", fmt.Errorf("%s is not set and %v", setting, err)
		}
		path = filepath.Join(root, underRoot)
	}
	if !fileExists(path) {
		return "", fmt.Errorf("%s: no program at %s (set %s to one)", setting, path, setting)
	}
	return path, nil
}

// FreePort is a loopback TCP port nothing listens on right now.
func FreePort(t TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("no free loopback port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Process is a started program whose output goes to a log file.
type Process struct {
	Name string
	Cmd  *exec.Cmd
	Log  string

	stopOnce sync.Once
	exited   chan struct{}
}

// start runs path with args, its output into dir/name.log.
func start(name, dir, path string, args []string, cred *syscall.Credential) (*Process, error) {
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("cannot start %s (%s): %v", name, path, err)
	}
	p := &Process{Name: name, Cmd: cmd, Log: logPath, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

// Signal sends sig to the process.
func (p *Process) Signal(sig syscall.Signal) error {
	return p.Cmd.Process.Signal(sig)
}

// Stop ends the process: SIGTERM, then SIGKILL if it has not exited within
// 10 s. Safe to call more than once.
func (p *Process) Stop() {
	p.stopOnce.Do(func() {
		_ = p.Cmd.Process.Signal(syscall.SIGCONT)
		_ = p.Cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = p.Cmd.Process.Kill()
			<-p.exited
		}
	})
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// LogTail is the end of the process's output, for failure messages.
func (p *Process) LogTail() string {
	data, _ := os.ReadFile(p.Log)
	const most = 4000
	if len(data) > most {
		data = data[len(data)-most:]
	}
	return string(bytes.TrimSpace(data))
}

// waitUntil polls ready every 50 ms until it answers true, the process
// exits, or within passes.
func waitUntil(p *Process, within time.Duration, what string, ready func() bool) error {
	deadline := time.Now().Add(within)
	for {
		if ready() {
			return nil
		}
		if p.Exited() {
			return fmt.Errorf("%s exited before %s; its log:\n%s", p.Name, what, p.LogTail())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not %s within %v; its log:\n%s", p.Name, what, within, p.LogTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func portString(port int) string {
	return strconv.Itoa(port)
}
