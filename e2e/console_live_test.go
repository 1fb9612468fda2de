package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// consoleSandbox starts a bay with profiles (default ones if empty), creates a sandbox of
// profile, opens Chromium and signs in on the sandbox's page tab.
func consoleSandbox(t *testing.T, profiles, profile, tab string) (*Bay, string, *page) {
	t.Helper()
	docker(t)
	b := startBay(t, bayOptions{profiles: profiles})
	id := b.create(map[string]any{"profile": profile}, nil).Str("id")
	p := startChromium(t, t.TempDir())
	p.viewport(1280, 800)
	p.navigate(b.URL + "/console/#/sandboxes/" + id + "/" + tab)
	p.waitFor("the sign-in form", `document.getElementById('apikey')`, 10*time.Second)
	p.eval(`document.getElementById('apikey').value = `+jsString(apiKey)+`; document.querySelector('form.signin').requestSubmit()`, nil)
	return b, id, p
}

// TestConsoleJobs drives the jobs tab in headless Chromium against the real bay and engine: a
// job's output shows live from its Server-Sent Events, read with fetch (the key in the
// Authorization header and never in a URL, no polling), and the console's stream reader
// resumes a stream from an event id (Last-Event-ID). No console error, CSP violation or
// overflow, a name on every control, and screenshots.
func TestConsoleJobs(t *testing.T) {
	shots := consoleShots(t)
	_, id, p := consoleSandbox(t, "", "python-default", "jobs")
	clean := func(where string) { t.Helper(); p.check(t, where, nil) }

	// A job that prints a line a second: its first line shows while it still runs.
	p.waitFor("the job form", `!document.querySelector('form[aria-label="Start a job"]').hidden`, 30*time.Second)
	p.eval(`performance.clearResourceTimings(); performance.setResourceTimingBufferSize(1000);
		document.getElementById('job-command').value = 'for i in 1 2 3 4; do echo line$i; sleep 1; done; echo oops >&2';
		document.querySelector('form[aria-label="Start a job"]').requestSubmit()`, nil)
	out := `(document.querySelector('#job-output pre.out') || {}).textContent || ''`
	p.waitFor("the first line live", out+`.includes('line1')`, 20*time.Second)
	var state string
	p.eval(`document.getElementById('job-state').textContent`, &state)
	var text string
	p.eval(out, &text)
	if strings.Contains(text, "line4") || strings.Contains(state, "exit") {
		t.Fatalf("the first line came only with the end of the job: output %q, state %q", text, state)
	}
	p.screenshot(shots, "sandbox-jobs-live")
	p.waitFor("the job's end", `document.getElementById('job-state').textContent.includes('exit 0')`, 30*time.Second)
	p.eval(out, &text)
	if text != "line1\nline2\nline3\nline4\n" {
		t.Fatalf("job output in the console = %q", text)
	}
	p.waitFor("stderr", `document.querySelector('#job-output pre.err').textContent === 'oops\n' && !document.querySelector('#job-output pre.err').hidden`, 5*time.Second)
	// One streamed request, no polling, and the key in no URL.
	var urls []string
	p.eval(`performance.getEntriesByType('resource').map((e) => e.name)`, &urls)
	streams := 0
	for _, u := range urls {
		if strings.Contains(u, apiKey) {
			t.Errorf("the API key is in a URL: %s", u)
		}
		if strings.Contains(u, "/output") {
			if !strings.Contains(u, "follow=true") || strings.Contains(u, "offset") {
				t.Errorf("the output was read without following the stream: %s", u)
			}
			streams++
		}
	}
	if streams != 1 {
		t.Errorf("%d output requests for one job, want 1 stream: %v", streams, urls)
	}
	p.screenshot(shots, "sandbox-jobs-done")
	clean("jobs")

	// The console's stream reader resumes from an event id: from "12:0" (after line1 and
	// line2) it yields line3, line4, the stderr line and the end.
	var jobID string
	p.eval(`document.querySelector('#job-output h3 .mono').textContent`, &jobID)
	var resumed struct {
		Stdout, Stderr, End, LastID string
	}
	p.eval(`import('/console/js/api.js').then(async (m) => {
		const got = { Stdout: '', Stderr: '', End: '', LastID: '' };
		got.LastID = await m.events(`+jsString("/v1/sandboxes/"+id+"/jobs/")+` + `+jsString(jobID)+` + '/output?follow=true', '12:0', (type, data) => {
			const v = JSON.parse(data);
			if (type === 'end') got.End = v.status; else if (type === 'stdout') got.Stdout += v.data; else got.Stderr += v.data;
		});
		return got;
	})`, &resumed)
	if resumed.Stdout != "line3\nline4\n" || resumed.Stderr != "oops\n" || resumed.End != "succeeded" || resumed.LastID != "24:5" {
		t.Errorf("resumed stream from 12:0 = %+v", resumed)
	}

}

// TestConsoleBrowser drives the browser tab in headless Chromium on a sandbox with ship and
// the gull browser runtime: it opens a page served from the workspace, takes a screenshot
// through the public browser exec API into /workspace/screenshots and shows it through the
// files API; the browser's own PNG is kept next to the console's screenshots, wide and narrow,
// with no console error, CSP violation or overflow and a name on every control.
func TestConsoleBrowser(t *testing.T) {
	shots := consoleShots(t)
	b, id, p := consoleSandbox(t, browserProfiles, "browser-python", "overview")
	b.writeFile(id, "site/index.html", formPage)
	serveSite(t, b, id)
	clean := func(where string) { t.Helper(); p.check(t, where, nil) }

	p.waitFor("the browser tab link", `!document.getElementById('tablink-browser').hidden`, 20*time.Second)
	p.navigate(b.URL + "/console/#/sandboxes/" + id + "/browser")
	p.waitFor("the screenshot form", `document.querySelector('form[aria-label="Take a browser screenshot"]') && document.querySelector('#shot-list .empty')`, 20*time.Second)
	p.eval(`document.getElementById('shot-url').value = 'http://ship:8000/index.html';
		document.querySelector('form[aria-label="Take a browser screenshot"]').requestSubmit()`, nil)
	p.waitFor("the screenshot shown", `document.querySelector('#shot-view img.shot') && document.querySelector('#shot-view img.shot').complete && document.querySelector('#shot-view img.shot').naturalWidth > 0`, 90*time.Second)
	p.waitFor("the screenshot listed", `document.querySelector('#shot-list table')`, 10*time.Second)
	var saved string
	p.eval(`document.getElementById('shot-status').textContent.replace('Saved to /workspace/', '')`, &saved)
	if !strings.HasPrefix(saved, "screenshots/console-") || !strings.HasSuffix(saved, ".png") {
		t.Fatalf("screenshot status: %q", saved)
	}
	png := expect(t, b.download(id, saved), 200, "the browser's screenshot")
	if !bytes.HasPrefix(png.Body, []byte("\x89PNG\r\n\x1a\n")) || len(png.Body) < 1000 {
		t.Fatalf("the browser's screenshot is not a PNG: %d bytes", len(png.Body))
	}
	if err := os.WriteFile(filepath.Join(shots, "browser-screenshot.png"), png.Body, 0o644); err != nil {
		t.Fatal(err)
	}
	var history string
	p.eval(`fetch('/v1/sandboxes/`+id+`/history?exec_type=browser&limit=5', {headers: {Authorization: 'Bearer ' + sessionStorage.getItem('shipyard.apiKey')}}).then((r) => r.text())`, &history)
	if !strings.Contains(history, "screenshot screenshots/console-") || !strings.Contains(history, "open 'http://ship:8000/index.html'") {
		t.Errorf("the console's browser commands are not in the history: %s", history)
	}
	for _, width := range []int{1280, 390} {
		p.viewport(width, 800)
		name := "sandbox-browser"
		if width < 1280 {
			name += "-narrow"
		}
		time.Sleep(300 * time.Millisecond)
		p.screenshot(shots, name)
		clean(name)
	}
}
