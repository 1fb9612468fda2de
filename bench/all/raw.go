package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/api/shipapi"
)

// Labels on everything the benchmark creates itself (scripts/check-leftovers.sh looks for
// shipyard.test; the run label lets the final sweep find exactly this run's leftovers).
const (
	labelTest = "shipyard.test"
	labelRun  = "shipyard.bench.run"
)

// rawSandbox is the physical baseline of a sandbox: a named volume and a container of the
// same image with the same hardening, limits, mount, port publishing and user as bay's Docker
// driver gives a session container (internal/bay/docker containerConfig/hostConfig and
// internal/bay/sandbox containerSpec), created with the Engine API directly.
type rawSandbox struct {
	Volume   string
	ID       string
	Endpoint string // http://<container IP>:8123, as connect_mode auto resolves it
	// Parts of the cold start, measured around each Engine API call.
	VolumeCreate, Create, Start time.Duration
}

// rawImage is what differs between the runtimes' raw baselines.
type rawImage struct {
	image string
	port  int
	pids  int64
}

// rawCreate creates the volume and a ship container and starts it; it registers both for
// cleanup before anything can fail.
func (b *bench) rawCreate(ctx context.Context) (*rawSandbox, error) {
	return b.rawCreateOf(ctx, rawImage{image: b.image, port: shipapi.DefaultPort, pids: 256})
}

// rawCreateOf is rawCreate for any runtime image.
func (b *bench) rawCreateOf(ctx context.Context, ri rawImage) (*rawSandbox, error) {
	b.seq++
	name := fmt.Sprintf("shipyard-bench-%s-%d", b.runID, b.seq)
	labels := map[string]string{labelTest: "bench", labelRun: b.runID}
	rs := &rawSandbox{Volume: name}
	t0 := time.Now()
	if _, err := b.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: name, Labels: labels}); err != nil {
		return nil, fmt.Errorf("raw: create volume: %w", err)
	}
	b.clean.volume(name)
	rs.VolumeCreate = time.Since(t0)

	port, _ := network.PortFrom(uint16(ri.port), network.TCP)
	pids := ri.pids
	noInit := false
	stop := 10
	cfg := &container.Config{
		Hostname: "sandbox",
		User:     "1000:1000",
		Env: []string{"BAY_SANDBOX_ID=" + name, "BAY_SESSION_ID=" + name,
			"BAY_WORKSPACE_PATH=" + shipapi.DefaultWorkspace},
		Labels:       labels,
		Image:        ri.image,
		ExposedPorts: network.PortSet{port: {}},
		StopTimeout:  &stop,
	}
	hc := &container.HostConfig{
		CapDrop:     []string{"ALL"},
		SecurityOpt: []string{"no-new-privileges:true"},
		Init:        &noInit,
		Resources: container.Resources{
			NanoCPUs: 1e9, Memory: 1 << 30, MemorySwap: 1 << 30, PidsLimit: &pids,
		},
		Mounts:       []mount.Mount{{Type: mount.TypeVolume, Source: name, Target: shipapi.DefaultWorkspace}},
		PortBindings: network.PortMap{port: {{HostIP: loopback, HostPort: ""}}},
	}
	t1 := time.Now()
	res, err := b.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name, Config: cfg, HostConfig: hc})
	if err != nil {
		return nil, fmt.Errorf("raw: create container: %w", err)
	}
	rs.ID = res.ID
	b.clean.container(res.ID)
	rs.Create = time.Since(t1)
	t2 := time.Now()
	if _, err := b.cli.ContainerStart(ctx, rs.ID, client.ContainerStartOptions{}); err != nil {
		return nil, fmt.Errorf("raw: start container: %w", err)
	}
	ins, err := b.cli.ContainerInspect(ctx, rs.ID, client.ContainerInspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("raw: inspect container: %w", err)
	}
	rs.Start = time.Since(t2)
	for _, ep := range ins.Container.NetworkSettings.Networks {
		if ep != nil && ep.IPAddress.IsValid() {
			rs.Endpoint = "http://" + ep.IPAddress.String() + ":" + strconv.Itoa(ri.port)
			break
		}
	}
	if rs.Endpoint == "" {
		return nil, fmt.Errorf("raw: container %s has no IP address", rs.ID)
	}
	return rs, nil
}

// rawRemove removes the container and its volume (not timed).
func (b *bench) rawRemove(ctx context.Context, rs *rawSandbox) {
	if rs == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if rs.ID != "" {
		if _, err := b.cli.ContainerRemove(ctx, rs.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err == nil {
			b.clean.containerGone(rs.ID)
		}
	}
	if _, err := b.cli.VolumeRemove(ctx, rs.Volume, client.VolumeRemoveOptions{Force: true}); err == nil {
		b.clean.volumeGone(rs.Volume)
	}
}

// engineExec runs cmd in the container through the Engine API (exec create, attach, wait for
// the exit code) as user 1000 and returns its stdout.
func (b *bench) engineExec(ctx context.Context, id string, cmd ...string) (string, error) {
	ex, err := b.cli.ExecCreate(ctx, id, client.ExecCreateOptions{User: "1000:1000", Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return "", fmt.Errorf("exec create: %w", err)
	}
	att, err := b.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return "", fmt.Errorf("exec attach: %w", err)
	}
	defer att.Close()
	var stdout, stderr bytes.Buffer
	if _, err := stdcopy.StdCopy(&stdout, &stderr, att.Reader); err != nil {
		return "", fmt.Errorf("exec read: %w", err)
	}
	ins, err := b.cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
	if err != nil {
		return "", fmt.Errorf("exec inspect: %w", err)
	}
	if ins.ExitCode != 0 {
		return stdout.String(), fmt.Errorf("exec %v: exit code %d: %s", cmd, ins.ExitCode, stderr.String())
	}
	return stdout.String(), nil
}

// ---- ship, spoken to directly on the container endpoint ----

// shipWaitHealthy polls ship's /health every 5 ms (bay's readiness wait backs off from 20 ms:
// the baseline takes the fastest reasonable poll so that it is a floor).
func (b *bench) shipWaitHealthy(ctx context.Context, endpoint string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var last error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+shipapi.PathHealth, nil)
		resp, err := b.shipHTTP.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("ship at %s not healthy: %w (last: %v)", endpoint, ctx.Err(), last)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// getJSON GETs u and decodes a 200 answer into out.
func (b *bench) getJSON(ctx context.Context, u string, out any) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := b.shipHTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d", u, resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func (b *bench) shipPost(ctx context.Context, endpoint, path string, in, out any) error {
	raw, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint+path, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.shipHTTP.Do(req)
	if err != nil {
		return fmt.Errorf("ship %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("ship %s: read: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("ship %s: HTTP %d: %s", path, resp.StatusCode, bytes.TrimSpace(body))
	}
	return json.Unmarshal(body, out)
}

// shipPython runs code on ship's /ipython/exec and checks the output.
func (b *bench) shipPython(ctx context.Context, endpoint, code, want string) error {
	var r shipapi.ExecPythonResponse
	if err := b.shipPost(ctx, endpoint, shipapi.PathPythonExec, shipapi.ExecPythonRequest{Code: code, Timeout: 120}, &r); err != nil {
		return err
	}
	if !r.Success || lastLine(r.Output.Text) != want {
		return fmt.Errorf("ship python %q: success=%v output=%q", code, r.Success, r.Output.Text)
	}
	return nil
}

// lastLine is the last line of a cell's output: IPython may print warnings before the
// result (e.g. "Output cache limit hit" after 1000 results in one kernel).
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// shipShell runs command on ship's /shell/exec and checks the exit code.
func (b *bench) shipShell(ctx context.Context, endpoint, command string) error {
	timeout := 120
	var r shipapi.ExecShellResponse
	if err := b.shipPost(ctx, endpoint, shipapi.PathShellExec, shipapi.ExecShellRequest{Command: command, Timeout: &timeout}, &r); err != nil {
		return err
	}
	if !r.Success || r.ReturnCode != 0 {
		return fmt.Errorf("ship shell %q: exit %d: %s", command, r.ReturnCode, r.Stderr)
	}
	return nil
}

// shipUpload streams src to ship's /fs/upload (multipart: file_path, then file).
func (b *bench) shipUpload(ctx context.Context, endpoint, path string, src io.Reader, size int64) error {
	pr, ctype := multipartStream(shipapi.UploadPathField, path, shipapi.UploadFileField, path, src)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint+shipapi.PathFSUpload, pr)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", ctype)
	resp, err := b.shipHTTP.Do(req)
	if err != nil {
		pr.CloseWithError(err)
		return fmt.Errorf("ship upload: %w", err)
	}
	defer resp.Body.Close()
	var r shipapi.UploadResponse
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &r) != nil || !r.Success || r.Size != size {
		return fmt.Errorf("ship upload: HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(body))
	}
	return nil
}

// shipDownload streams path from ship's /fs/download into dst.
func (b *bench) shipDownload(ctx context.Context, endpoint, path string, dst io.Writer) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+shipapi.PathFSDownload+"?"+shipapi.DownloadPathParam+"="+url.QueryEscape(path), nil)
	if err != nil {
		return 0, err
	}
	resp, err := b.shipHTTP.Do(req)
	if err != nil {
		return 0, fmt.Errorf("ship download: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return 0, fmt.Errorf("ship download: HTTP %d: %s", resp.StatusCode, body)
	}
	return io.Copy(dst, resp.Body)
}

// shipStat reads ship's /stat (its own RSS and the kernel's).
func (b *bench) shipStat(ctx context.Context, endpoint string) (shipapi.StatResponse, error) {
	var st shipapi.StatResponse
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+shipapi.PathStat, nil)
	resp, err := b.shipHTTP.Do(req)
	if err != nil {
		return st, fmt.Errorf("ship /stat: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("ship /stat: HTTP %d", resp.StatusCode)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}
