package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// freePorts reserves n distinct free TCP ports on 127.0.0.1 by listening on
// port 0, then releases them all together (so the n ports differ).
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// listening reports whether something accepts connections on 127.0.0.1:port.
func listening(port int) bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 500*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// waitPortsClosed waits until none of ports listens any more.
func waitPortsClosed(timeout time.Duration, ports ...int) error {
	deadline := time.Now().Add(timeout)
	for {
		var open []int
		for _, p := range ports {
			if p > 0 && listening(p) {
				open = append(open, p)
			}
		}
		if len(open) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ports %v still listen after %s", open, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// startDetached starts argv in its own session (setsid) with stdin from
// /dev/null and stdout+stderr appended to logPath, so that it outlives the
// launcher. exited is closed when the child ends while this launcher still
// runs (the launcher reaps it).
func startDetached(argv []string, logPath string) (pid int, exited <-chan struct{}, err error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return 0, nil, err
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, nil, err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "==== %s starting %s\n", time.Now().Format(time.RFC3339), argv[0])
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return 0, nil, err
	}
	defer devnull.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Dir = "/"
	if err := cmd.Start(); err != nil {
		return 0, nil, err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	return cmd.Process.Pid, done, nil
}

// procAlive reports whether pid is a live (non-zombie) process whose command
// line contains every one of marks (guards against recycled pids).
func procAlive(pid int, marks ...string) bool {
	if pid <= 0 {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// Field 3 (after "pid (comm)") is the state; Z and X mean gone.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		if s := stat[i+2]; s == 'Z' || s == 'X' {
			return false
		}
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	cl := string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
	for _, m := range marks {
		if !strings.Contains(cl, m) {
			return false
		}
	}
	return true
}

// stopProc sends SIGTERM to pid's process group (it is a session leader),
// waits up to grace, then sends SIGKILL and waits again.
func stopProc(name string, pid int, grace time.Duration, marks ...string) error {
	if !procAlive(pid, marks...) {
		return nil
	}
	progress("stopping %s (pid %d)", name, pid)
	signal := func(sig syscall.Signal) {
		// Group first (children of the process too), then the process itself.
		if err := syscall.Kill(-pid, sig); err != nil {
			_ = syscall.Kill(pid, sig)
		}
	}
	signal(syscall.SIGTERM)
	if waitGone(pid, grace, marks...) {
		waitReaped(pid, 5*time.Second)
		return nil
	}
	progress("%s (pid %d) did not stop within %s; sending SIGKILL", name, pid, grace)
	signal(syscall.SIGKILL)
	if waitGone(pid, 10*time.Second, marks...) {
		waitReaped(pid, 5*time.Second)
		return nil
	}
	return errors.New(name + " (pid " + strconv.Itoa(pid) + ") survived SIGKILL")
}

func waitGone(pid int, timeout time.Duration, marks ...string) bool {
	deadline := time.Now().Add(timeout)
	for procAlive(pid, marks...) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

// waitReaped waits while pid is a zombie. Our detached children are orphans
// whose new parent (init) reaps them; until it does they still show up in
// `pgrep`.
func waitReaped(pid int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return
		}
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z' {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tail returns the last n lines of a file (for error reports).
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
