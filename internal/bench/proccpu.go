package bench

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// userHZ is the unit of a process's CPU times in /proc/PID/stat (USER_HZ: 100 on every Linux
// architecture Go runs on).
const userHZ = 100

// selfCPU is the CPU time (user and system) this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is the CPU time (user and system, every thread) process pid has used.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	// Fields after the command name (which may hold spaces) in parentheses: state is the 3rd
	// field of the file, utime and stime the 14th and 15th.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	return time.Duration(utime+stime) * time.Second / userHZ, nil
}

// listenerPID finds the process listening on endpoint's TCP port on this machine (Linux: the
// socket's inode in /proc/net/tcp*, then the process holding it); 0 when none is found.
func listenerPID(endpoint string) int {
	u, err := url.Parse(endpoint)
	if err != nil || u.Port() == "" {
		return 0
	}
	port, err := strconv.ParseUint(u.Port(), 10, 16)
	if err != nil {
		return 0
	}
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			// local_address is HEXIP:HEXPORT, st 0A is LISTEN, inode is the 10th field.
			if len(fs) < 10 || fs[3] != "0A" || !strings.HasSuffix(fs[1], fmt.Sprintf(":%04X", port)) {
				continue
			}
			inodes["socket:["+fs[9]+"]"] = true
		}
	}
	if len(inodes) == 0 {
		return 0
	}
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err == nil && inodes[target] {
			pid, _ := strconv.Atoi(strings.Split(fd, "/")[2])
			return pid
		}
	}
	return 0
}
