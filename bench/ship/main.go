// Command ship-bench measures the ship runtime on loopback:
//
//  1. idle RSS of ship without a kernel (target <= 15 MiB);
//  2. python `1+1` round trip through ship's HTTP API versus a direct kernel
//     round trip with the same Jupyter client (target ratio <= 1.3x at p50), and, as the
//     floor any client meets, Jupyter's reference Python client (jupyter_client) on its own
//     kernel;
//  3. a large upload then download through ship: MB/s each way (target >= 300),
//     ship's peak RSS growth (target <= 16 MiB) and sha256 equality.
//
// Usage: go run ./bench/ship -out DIR [-quick] [-ship BINARY] [-python PY]
//
// It writes DIR/ship-bench.json and DIR/ship-bench.md and prints the table.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/shipyard-dev/shipyard/internal/ship/jupyter"
)

type latency struct {
	N     int     `json:"n"`
	MinMS float64 `json:"min_ms"`
	P50MS float64 `json:"p50_ms"`
	P99MS float64 `json:"p99_ms"`
	MaxMS float64 `json:"max_ms"`
}

type results struct {
	When         time.Time `json:"when"`
	Quick        bool      `json:"quick"`
	ScratchDir   string    `json:"scratch_dir"`
	IdleRSSMiB   float64   `json:"idle_rss_mib"`
	PythonShip   latency   `json:"python_ship"`
	PythonDirect latency   `json:"python_direct"`
	PythonRatio  float64   `json:"python_ratio_p50"`
	// PythonRefClient is jupyter_client's round trip; N is 0 when it could not run.
	PythonRefClient latency `json:"python_reference_client"`
	RefClientError  string  `json:"python_reference_client_error,omitempty"`
	TransferBytes   int64   `json:"transfer_bytes"`
	UploadMBps      float64 `json:"upload_mb_per_s"`
	UploadShipCPU   float64 `json:"upload_ship_cpu_seconds"`
	DownloadMBps    float64 `json:"download_mb_per_s"`
	RSSBeforeMiB    float64 `json:"rss_before_transfer_mib"`
	RSSPeakMiB      float64 `json:"rss_peak_mib"`
	RSSGrowthMiB    float64 `json:"rss_growth_mib"`
	SHA256Equal     bool    `json:"sha256_equal"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "ship-bench:", err)
		os.Exit(1)
	}
}

func run() error {
	out := flag.String("out", "", "output directory (required)")
	quick := flag.Bool("quick", false, "smaller sizes and fewer repetitions")
	shipBin := flag.String("ship", "", "ship binary (default: build ./cmd/ship)")
	py := flag.String("python", envOr("SHIP_PYTHON", "/usr/bin/python3"), "Python with ipykernel")
	reps := flag.Int("reps", 200, "python round trips per side")
	sizeMiB := flag.Int64("size-mib", 1024, "transfer size in MiB")
	scratch := flag.String("tmp", defaultScratch(), "scratch dir for workspaces and the source file (default tmpfs, so the disk does not dominate)")
	flag.Parse()
	if *out == "" {
		return errors.New("-out DIR is required")
	}
	if *quick {
		*reps, *sizeMiB = 50, 128
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(*scratch, "ship-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if *shipBin == "" {
		*shipBin = filepath.Join(tmp, "ship")
		fmt.Fprintln(os.Stderr, "building ship ...")
		b := exec.Command("go", "build", "-o", *shipBin, "github.com/shipyard-dev/shipyard/cmd/ship")
		b.Env = append(os.Environ(), "CGO_ENABLED=0")
		b.Stderr = os.Stderr
		if err := b.Run(); err != nil {
			return fmt.Errorf("build ship: %w", err)
		}
	}
	res := results{When: time.Now().UTC(), Quick: *quick, ScratchDir: *scratch}

	// 1. Idle RSS without a kernel.
	fmt.Fprintln(os.Stderr, "idle RSS ...")
	s, err := startShip(*shipBin, filepath.Join(tmp, "ws-idle"), *py, "--no-kernel")
	if err != nil {
		return err
	}
	if _, err := get(s.url + "/health"); err != nil {
		s.stop()
		return err
	}
	time.Sleep(500 * time.Millisecond) // let the runtime settle after start
	res.IdleRSSMiB = mib(procStatus(s.pid(), "VmRSS"))
	s.stop()

	// 2. Python round trips.
	fmt.Fprintln(os.Stderr, "python round trips ...")
	if err := benchPython(&res, *shipBin, filepath.Join(tmp, "ws-py"), *py, *reps); err != nil {
		return err
	}

	fmt.Fprintln(os.Stderr, "python round trips, reference client ...")
	if ds, err := benchRefClient(*py, *reps); err != nil {
		// Informational: a host without jupyter_client still gets every other figure.
		res.RefClientError = err.Error()
		fmt.Fprintln(os.Stderr, "reference client:", err)
	} else {
		res.PythonRefClient = stats(ds)
	}

	// 3. Upload / download.
	fmt.Fprintf(os.Stderr, "transfer %d MiB ...\n", *sizeMiB)
	if err := benchTransfer(&res, *shipBin, tmp, *py, *sizeMiB<<20); err != nil {
		return err
	}

	j, _ := json.MarshalIndent(res, "", "  ")
	if err := os.WriteFile(filepath.Join(*out, "ship-bench.json"), append(j, '\n'), 0o644); err != nil {
		return err
	}
	md := table(res)
	if err := os.WriteFile(filepath.Join(*out, "ship-bench.md"), []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Print(md)
	return nil
}

func table(r results) string {
	ok := func(b bool) string {
		if b {
			return "yes"
		}
		return "**no**"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| measure | value | target | met |\n|---|---|---|---|\n")
	fmt.Fprintf(&b, "| ship idle RSS (no kernel) | %.1f MiB | <= 15 MiB | %s |\n", r.IdleRSSMiB, ok(r.IdleRSSMiB <= 15))
	fmt.Fprintf(&b, "| python 1+1 via ship (min/p50/p99/max, n=%d) | %.2f / %.2f / %.2f / %.2f ms | | |\n", r.PythonShip.N, r.PythonShip.MinMS, r.PythonShip.P50MS, r.PythonShip.P99MS, r.PythonShip.MaxMS)
	fmt.Fprintf(&b, "| python 1+1 direct kernel (min/p50/p99/max, n=%d) | %.2f / %.2f / %.2f / %.2f ms | | |\n", r.PythonDirect.N, r.PythonDirect.MinMS, r.PythonDirect.P50MS, r.PythonDirect.P99MS, r.PythonDirect.MaxMS)
	fmt.Fprintf(&b, "| ship / direct (p50) | %.2fx | <= 1.3x | %s |\n", r.PythonRatio, ok(r.PythonRatio <= 1.3))
	if r.PythonRefClient.N > 0 {
		fmt.Fprintf(&b, "| python 1+1, jupyter_client to its own kernel (min/p50/p99/max, n=%d) | %.2f / %.2f / %.2f / %.2f ms | | |\n", r.PythonRefClient.N, r.PythonRefClient.MinMS, r.PythonRefClient.P50MS, r.PythonRefClient.P99MS, r.PythonRefClient.MaxMS)
	} else {
		fmt.Fprintf(&b, "| python 1+1, jupyter_client | not measured: %s | | |\n", r.RefClientError)
	}
	fmt.Fprintf(&b, "| scratch dir (workspace, source file) | %s | | |\n", r.ScratchDir)
	fmt.Fprintf(&b, "| upload %d MiB | %.0f MB/s | >= 300 MB/s | %s |\n", r.TransferBytes>>20, r.UploadMBps, ok(r.UploadMBps >= 300))
	fmt.Fprintf(&b, "| ship CPU time during upload | %.2f s (%.0f MB per ship CPU-second) | | |\n", r.UploadShipCPU, float64(r.TransferBytes)/1e6/max(r.UploadShipCPU, 0.01))
	fmt.Fprintf(&b, "| download %d MiB | %.0f MB/s | >= 300 MB/s | %s |\n", r.TransferBytes>>20, r.DownloadMBps, ok(r.DownloadMBps >= 300))
	fmt.Fprintf(&b, "| ship peak RSS growth during transfer | %.1f MiB (%.1f -> peak %.1f) | <= 16 MiB | %s |\n", r.RSSGrowthMiB, r.RSSBeforeMiB, r.RSSPeakMiB, ok(r.RSSGrowthMiB <= 16))
	fmt.Fprintf(&b, "| sha256 equal after round trip | %v | true | %s |\n", r.SHA256Equal, ok(r.SHA256Equal))
	return b.String()
}

func benchPython(res *results, bin, ws, py string, reps int) error {
	s, err := startShip(bin, ws, py)
	if err != nil {
		return err
	}
	defer s.stop()
	exec1 := func() (time.Duration, error) {
		t0 := time.Now()
		resp, err := http.Post(s.url+"/ipython/exec", "application/json", strings.NewReader(`{"code":"1+1","timeout":30}`))
		if err != nil {
			return 0, err
		}
		var r struct {
			Success bool `json:"success"`
			Output  struct {
				Text string `json:"text"`
			} `json:"output"`
		}
		err = json.NewDecoder(resp.Body).Decode(&r)
		resp.Body.Close()
		d := time.Since(t0)
		if err != nil || !r.Success || r.Output.Text != "2" {
			return 0, fmt.Errorf("ship exec: %v %+v", err, r)
		}
		return d, nil
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	k, err := jupyter.StartKernel(ctx, jupyter.KernelConfig{Python: py, Dir: ws, Env: os.Environ()})
	if err != nil {
		return fmt.Errorf("direct kernel: %w", err)
	}
	defer k.Kill()
	direct1 := func() (time.Duration, error) {
		t0 := time.Now()
		ex, err := k.Client.Execute("1+1", false)
		if err != nil {
			return 0, err
		}
		err = ex.Wait(ctx, k.Exited())
		ex.Close()
		d := time.Since(t0)
		if r := ex.Result(); err != nil || r.Text != "2" {
			return 0, fmt.Errorf("direct exec: %v %+v", err, r)
		}
		return d, nil
	}
	// Warm both paths (ship's first call also waits for its kernel).
	for range 10 {
		if _, err := exec1(); err != nil {
			return err
		}
		if _, err := direct1(); err != nil {
			return err
		}
	}
	// Alternate so that drift (CPU frequency, other load) hits both sides alike.
	var viaShip, direct []time.Duration
	for range reps {
		d, err := exec1()
		if err != nil {
			return err
		}
		viaShip = append(viaShip, d)
		d, err = direct1()
		if err != nil {
			return err
		}
		direct = append(direct, d)
	}
	res.PythonShip, res.PythonDirect = stats(viaShip), stats(direct)
	res.PythonRatio = res.PythonShip.P50MS / res.PythonDirect.P50MS
	return nil
}

//go:embed refclient.py
var refClientScript string

// benchRefClient runs refclient.py with py and returns its round trips.
func benchRefClient(py string, reps int) ([]time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-c", refClientScript, "10", strconv.Itoa(reps))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s refclient.py: %w: %s", py, err, lastLine(stderr.String()))
	}
	var ms []float64
	if err := json.Unmarshal(out, &ms); err != nil || len(ms) != reps {
		return nil, fmt.Errorf("refclient.py printed %d round trips (%v), want %d", len(ms), err, reps)
	}
	ds := make([]time.Duration, len(ms))
	for i, m := range ms {
		ds[i] = time.Duration(m * float64(time.Millisecond))
	}
	return ds, nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

func stats(ds []time.Duration) latency {
	slices.Sort(ds)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	q := func(p float64) time.Duration {
		i := int(math.Ceil(p*float64(len(ds)))) - 1
		return ds[max(0, min(i, len(ds)-1))]
	}
	return latency{N: len(ds), MinMS: ms(ds[0]), P50MS: ms(q(0.5)), P99MS: ms(q(0.99)), MaxMS: ms(ds[len(ds)-1])}
}

func benchTransfer(res *results, bin, tmp, py string, size int64) error {
	src := filepath.Join(tmp, "src.bin")
	want, err := writeRandom(src, size)
	if err != nil {
		return err
	}
	s, err := startShip(bin, filepath.Join(tmp, "ws-xfer"), py, "--no-kernel", "--max-upload-bytes", strconv.FormatInt(size+1, 10))
	if err != nil {
		return err
	}
	defer s.stop()
	if _, err := get(s.url + "/health"); err != nil {
		return err
	}
	res.TransferBytes = size
	before := procStatus(s.pid(), "VmRSS")
	res.RSSBeforeMiB = mib(before)

	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	// A fixed-length body (multipart framing around the file) avoids chunked
	// encoding and an extra pipe copy, so the client is not the bottleneck.
	var frame bytes.Buffer
	mw := multipart.NewWriter(&frame)
	if err := mw.WriteField("file_path", "big.bin"); err != nil {
		return err
	}
	if _, err := mw.CreateFormFile("file", "big.bin"); err != nil {
		return err
	}
	prefix := bytes.Clone(frame.Bytes())
	frame.Reset()
	if err := mw.Close(); err != nil {
		return err
	}
	suffix := bytes.Clone(frame.Bytes())
	req, err := http.NewRequest(http.MethodPost, s.url+"/fs/upload",
		io.MultiReader(bytes.NewReader(prefix), f, bytes.NewReader(suffix)))
	if err != nil {
		return err
	}
	req.ContentLength = int64(len(prefix)) + size + int64(len(suffix))
	req.Header.Set("Content-Type", mw.FormDataContentType())
	cpu0 := cpuSeconds(s.pid())
	t0 := time.Now()
	// Large transport buffers: the default 4 KiB ones mean a syscall per 4 KiB.
	client := &http.Client{Transport: &http.Transport{WriteBufferSize: 1 << 20, ReadBufferSize: 1 << 20}}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	up := time.Since(t0)
	if resp.StatusCode != 200 {
		return fmt.Errorf("upload: %d %s", resp.StatusCode, body)
	}
	res.UploadMBps = float64(size) / 1e6 / up.Seconds()
	res.UploadShipCPU = cpuSeconds(s.pid()) - cpu0

	// The download is hashed as it arrives (no disk write on the client side).
	h := sha256.New()
	t0 = time.Now()
	resp, err = client.Get(s.url + "/fs/download?file_path=big.bin")
	if err != nil {
		return fmt.Errorf("download: %w", err)
	}
	n, err := io.CopyBuffer(h, resp.Body, make([]byte, 1<<20))
	resp.Body.Close()
	down := time.Since(t0)
	if err != nil || n != size {
		return fmt.Errorf("download: %d bytes, %v", n, err)
	}
	res.DownloadMBps = float64(size) / 1e6 / down.Seconds()
	peak := procStatus(s.pid(), "VmHWM")
	res.RSSPeakMiB = mib(peak)
	res.RSSGrowthMiB = mib(peak - before)

	res.SHA256Equal = hex.EncodeToString(h.Sum(nil)) == want
	os.Remove(src)
	return nil
}

func writeRandom(path string, size int64) (string, error) {
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	w := bufio.NewWriterSize(io.MultiWriter(f, h), 1<<20)
	block := make([]byte, 1<<20)
	for left := size; left > 0; left -= int64(len(block)) {
		rand.Read(block)
		n := min(int64(len(block)), left)
		if _, err := w.Write(block[:n]); err != nil {
			return "", err
		}
	}
	if err := w.Flush(); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func defaultScratch() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if f, err := os.CreateTemp("/dev/shm", "probe-"); err == nil {
			f.Close()
			os.Remove(f.Name())
			return "/dev/shm"
		}
	}
	return os.TempDir()
}

type shipProc struct {
	cmd *exec.Cmd
	url string
}

func (s *shipProc) pid() int { return s.cmd.Process.Pid }

func (s *shipProc) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
}

var addrRE = regexp.MustCompile(`msg="ship listening".* addr=(\S+)`)

func startShip(bin, ws, py string, extra ...string) (*shipProc, error) {
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return nil, err
	}
	args := append([]string{"--listen", "127.0.0.1:0", "--workspace", ws, "--python", py, "--skills-dir", filepath.Join(ws, ".none"), "--log-level", "info"}, extra...)
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start ship: %w", err)
	}
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if m := addrRE.FindStringSubmatch(sc.Text()); m != nil {
			go io.Copy(io.Discard, stderr)
			return &shipProc{cmd: cmd, url: "http://" + m[1]}, nil
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	return nil, errors.New("ship exited before listening")
}

func get(url string) ([]byte, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, bytes.TrimSpace(b))
	}
	return b, err
}

// procStatus reads a "kB" field of /proc/<pid>/status, in bytes.
func procStatus(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n << 10
			}
		}
	}
	return 0
}

// cpuSeconds is a process's user+system CPU time (clock ticks of 1/100 s).
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	k, _ := strconv.ParseFloat(f[12], 64)
	return (u + k) / 100
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
