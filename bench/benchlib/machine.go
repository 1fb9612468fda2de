package benchlib

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"

	"github.com/moby/moby/client"
)

// Machine describes the host a benchmark ran on (from /proc).
type Machine struct {
	Cores        int    `json:"cores"`
	CPUModel     string `json:"cpu_model,omitempty"`
	MemTotal     int64  `json:"mem_total_bytes"`
	MemAvailable int64  `json:"mem_available_bytes"`
	Kernel       string `json:"kernel,omitempty"`
	GOOS         string `json:"goos"`
	GOARCH       string `json:"goarch"`
}

func (m Machine) String() string {
	s := fmt.Sprintf("%d cores", m.Cores)
	if m.CPUModel != "" {
		s += " (" + m.CPUModel + ")"
	}
	s += fmt.Sprintf(", %.1f GiB memory (%.1f GiB available at start)", float64(m.MemTotal)/(1<<30), float64(m.MemAvailable)/(1<<30))
	if m.Kernel != "" {
		s += ", Linux " + m.Kernel
	}
	return s + ", " + m.GOOS + "/" + m.GOARCH
}

// ReadMachine reads cores, CPU model, memory and kernel release from /proc.
func ReadMachine() Machine {
	m := Machine{Cores: runtime.NumCPU(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH}
	m.MemTotal = MemInfo("MemTotal")
	m.MemAvailable = MemInfo("MemAvailable")
	if raw, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(raw))
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// LoadAvg is the first three fields of /proc/loadavg ("1.02 0.87 0.55"), "" when unreadable.
// The benchmark machine may be shared: a load above the core count means the figures carry
// other work's noise.
func LoadAvg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// MemInfo returns a /proc/meminfo field in bytes (0 when missing).
func MemInfo(field string) int64 {
	return kbField("/proc/meminfo", field)
}

// kbField reads "Field:   123 kB" from a /proc file, in bytes.
func kbField(path, field string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != field {
			continue
		}
		parts := strings.Fields(v)
		if len(parts) == 0 {
			return 0
		}
		n, _ := strconv.ParseInt(parts[0], 10, 64)
		if len(parts) > 1 && parts[1] == "kB" {
			n *= 1024
		}
		return n
	}
	return 0
}

// DockerVersion describes the engine from the Engine API: "20.10.24 (API 1.41, linux/amd64,
// storage driver overlay2, cgroup v1)". The storage driver matters: container create and
// start cost several times more on fuse-overlayfs than on overlay2.
func DockerVersion(ctx context.Context, cli *client.Client) (string, error) {
	v, err := cli.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		return "", fmt.Errorf("docker version: %w", err)
	}
	s := fmt.Sprintf("%s (API %s, %s/%s", v.Version, v.APIVersion, v.Os, v.Arch)
	if info, err := cli.Info(ctx, client.InfoOptions{}); err == nil {
		s += fmt.Sprintf(", storage driver %s, cgroup v%s", info.Info.Driver, info.Info.CgroupVersion)
	}
	return s + ")", nil
}

// GitRevision is the short HEAD of the repository at dir, with "-dirty" when the work tree has
// changes; "unknown" when git fails.
func GitRevision(dir string) string {
	out, err := exec.Command("git", "-C", dir, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	rev := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", dir, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		rev += "-dirty"
	}
	return rev
}
