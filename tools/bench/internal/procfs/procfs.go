// Package procfs reads what the peers measure of their own process: fields of /proc/self/status
// (threads, RSS), CPU time, and the TCP payload bytes received on the process's open sockets.
package procfs

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Status is a numeric field of /proc/self/status ("Threads"; "VmRSS", "VmHWM" in kB); 0 when
// absent.
func Status(field string) int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, field+":") {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(line[len(field)+1:]), " kB"))
			return n
		}
	}
	return 0
}

// Threads is the process's OS threads (/proc/self/status Threads).
func Threads() int { return Status("Threads") }

// CPUTime is the process's user + system CPU time (getrusage, all threads); 0 on an error.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// CPUSeconds is CPUTime in seconds.
func CPUSeconds() float64 { return CPUTime().Seconds() }

// TCPBytesReceived sums tcpi_bytes_received (TCP_INFO) over the process's open TCP sockets.
func TCPBytesReceived() (bytes uint64, sockets int) {
	dir := "/proc/self/fd"
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0
	}
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil || !strings.HasPrefix(target, "socket:") {
			continue
		}
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
		if err != nil {
			continue // not a TCP socket
		}
		bytes += info.Bytes_received
		sockets++
	}
	return bytes, sockets
}
