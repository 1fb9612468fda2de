package imagebuild

// Jobs of the real ship in a real container started as bay starts a sandbox: they run as the
// sandbox user, their files are out of its reach, a cancel kills grandchildren that ignore
// SIGTERM, and a ship killed mid-job reports the job lost after the container restarts.

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// jobOutput follows a job through ship's long poll until it ends and returns its stdout.
func (s *shipSandbox) jobOutput(t *testing.T, id string) (map[string]any, string) {
	t.Helper()
	var off, errOff int64
	var out strings.Builder
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		r := s.json("GET", fmt.Sprintf("/jobs/%s/output?stdout_offset=%d&stderr_offset=%d&wait_ms=5000", id, off, errOff), nil, 200)
		so, se := r["stdout"].(map[string]any), r["stderr"].(map[string]any)
		out.WriteString(so["data"].(string))
		off, errOff = int64(so["next"].(float64)), int64(se["next"].(float64))
		job := r["job"].(map[string]any)
		if job["status"] != "running" && off == int64(job["stdout"].(map[string]any)["bytes"].(float64)) {
			return job, out.String()
		}
	}
	t.Fatalf("job %s did not end", id)
	return nil, ""
}

func TestShipJobsInContainer(t *testing.T) {
	s := startShipSandbox(t, 512)

	t.Run("runs as the sandbox user, files out of its reach", func(t *testing.T) {
		j := s.json("POST", "/jobs", map[string]any{"kind": "shell", "command": "id -u; for i in 1 2 3; do echo l$i; sleep 0.2; done"}, 200)
		id := str(j, "id")
		job, out := s.jobOutput(t, id)
		if job["status"] != "succeeded" || out != "1000\nl1\nl2\nl3\n" {
			t.Fatalf("%v %q", job, out)
		}
		if got := s.ok("stat", "-c", "%u %a", "/var/tmp/shipyard-jobs"); got != "999 700" {
			t.Errorf("jobs files: %q", got)
		}
		r := s.shell("ls /var/tmp/shipyard-jobs; cat /var/tmp/shipyard-jobs/" + id + "/stdout; rm -rf /var/tmp/shipyard-jobs; echo done")
		if o := str(r, "stdout"); strings.Contains(o, id) || strings.Contains(o, "l1") || !strings.Contains(str(r, "stderr"), "Permission denied") {
			t.Errorf("user code reached the jobs directory: %v", r)
		}
		s.json("GET", "/jobs/"+id, nil, 200)
		// Artifacts are scanned and hashed as the sandbox user: its files, its permissions.
		a := s.json("POST", "/jobs", map[string]any{"kind": "shell", "output_paths": []string{"res"},
			"command": "mkdir -p res/sub; echo hello > res/sub/a.txt; mkdir -m 000 res/closed"}, 200)
		if job, _ := s.jobOutput(t, str(a, "id")); job["status"] != "succeeded" {
			t.Fatalf("artifact job: %v", job)
		} else if arts, _ := job["created_artifacts"].([]any); len(arts) != 1 ||
			arts[0].(map[string]any)["sha256"] != "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03" {
			t.Errorf("artifacts: %v", job)
		}
		py := s.json("POST", "/jobs", map[string]any{"kind": "python", "code": "import os\nprint(os.getuid())"}, 200)
		if job, out := s.jobOutput(t, str(py, "id")); job["status"] != "succeeded" || out != "1000\n" {
			t.Errorf("python job: %v %q", job, out)
		}
	})

	t.Run("1 GiB of output: capped, flagged, ship's RSS flat", func(t *testing.T) {
		before := s.json("GET", "/stat", nil, 200)["rss_bytes"].(float64)
		j := s.json("POST", "/jobs", map[string]any{"kind": "shell", "command": "head -c 1073741824 /dev/zero; echo end >&2"}, 200)
		id := str(j, "id")
		var job map[string]any
		peak := before
		for range 600 {
			job = s.json("GET", "/jobs/"+id, nil, 200)
			peak = max(peak, s.json("GET", "/stat", nil, 200)["rss_bytes"].(float64))
			if job["status"] != "running" {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		so := job["stdout"].(map[string]any)
		if job["status"] != "succeeded" || so["bytes"].(float64) != 64<<20 || so["total"].(float64) != 1<<30 || so["truncated"] != true {
			t.Fatalf("1 GiB job: %v", job)
		}
		t.Logf("ship RSS %.1f MiB before, %.1f MiB peak while 1 GiB went through", before/(1<<20), peak/(1<<20))
		if peak-before > 32<<20 {
			t.Errorf("ship's RSS grew by %.1f MiB", (peak-before)/(1<<20))
		}
		if r := s.json("GET", "/jobs/"+id+"/output?stderr_offset=0&stdout_offset=67108860", nil, 200); r["stdout"].(map[string]any)["next"].(float64) != 64<<20 || r["stderr"].(map[string]any)["data"] != "end\n" {
			t.Errorf("the end of a capped stream: %v", r["stdout"].(map[string]any)["next"])
		}
	})

	t.Run("cancel kills grandchildren that ignore SIGTERM", func(t *testing.T) {
		j := s.json("POST", "/jobs", map[string]any{"id": "cancel-me", "kind": "shell",
			"command": `bash -c 'trap "" TERM; echo $$ > /workspace/gc.pid; sleep 300' & sleep 300`}, 200)
		var gc string
		for range 100 {
			r := s.shell("cat /workspace/gc.pid 2>/dev/null")
			if gc = strings.TrimSpace(str(r, "stdout")); gc != "" {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if _, err := strconv.Atoi(gc); err != nil {
			t.Fatalf("grandchild pid %q", gc)
		}
		c := s.json("POST", "/jobs/"+str(j, "id")+"/cancel", nil, 200)
		if c["status"] != "cancelled" {
			t.Fatalf("cancel: %v", c)
		}
		if r := s.exec("kill", "-0", gc); r.code == 0 {
			t.Errorf("grandchild %s alive after the cancel", gc)
		}
	})

	t.Run("ship killed mid-job: lost after the restart", func(t *testing.T) {
		s.json("POST", "/jobs", map[string]any{"id": "doomed", "kind": "shell", "command": "echo started; sleep 300"}, 200)
		r := s.json("GET", "/jobs/doomed/output?wait_ms=5000", nil, 200)
		if r["stdout"].(map[string]any)["data"] != "started\n" {
			t.Fatalf("%v", r)
		}
		// Killing ship ends the container (tini exits with its child); starting the container
		// again starts a new ship on the same filesystem.
		s.exec("kill", "-9", strconv.Itoa(s.shipPID()))
		ctx := t.Context()
		deadline := time.Now().Add(30 * time.Second)
		for {
			ins, err := s.e.ContainerInspect(ctx, s.id, client.ContainerInspectOptions{})
			if err == nil && !ins.Container.State.Running {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the container still runs after ship was killed")
			}
			time.Sleep(100 * time.Millisecond)
		}
		if _, err := s.e.ContainerStart(ctx, s.id, client.ContainerStartOptions{}); err != nil {
			t.Fatal(err)
		}
		ins, err := s.e.ContainerInspect(ctx, s.id, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, ep := range ins.Container.NetworkSettings.Networks {
			if ep != nil && ep.IPAddress.IsValid() {
				s.url = fmt.Sprintf("http://%s:%d", ep.IPAddress, ShipPort)
			}
		}
		var job map[string]any
		for time.Now().Before(deadline.Add(30 * time.Second)) {
			st, b := s.call("GET", "/jobs/doomed", nil)
			if st == 200 && json.Unmarshal(b, &job) == nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if job["status"] != "lost" || !strings.Contains(str(job, "reason"), "ship restarted") {
			t.Fatalf("after the restart: %v", job)
		}
		r = s.json("GET", "/jobs/doomed/output", nil, 200)
		if r["stdout"].(map[string]any)["data"] != "started\n" {
			t.Errorf("the lost job's output: %v", r)
		}
	})
}
