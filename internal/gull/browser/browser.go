package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/shipyard-dev/shipyard/internal/gull/cdp"
)

// UserError is a failure of a command that the caller caused or can fix
// (element not found, stale ref, bad URL): its message is shown as is.
type UserError struct{ Msg string }

func (e *UserError) Error() string { return e.Msg }

func userErrorf(format string, args ...any) error {
	return &UserError{Msg: fmt.Sprintf(format, args...)}
}

// Tab is one page target with its flat session.
type Tab struct {
	TargetID  string
	SessionID string
	// refs maps a snapshot ref (e1, e2, ...) to the DOM node it named; it is
	// replaced by every snapshot and cleared by navigations.
	refs map[string]int64
}

// Browser is one running Chromium. It is not safe for concurrent use: the
// caller runs one command at a time.
type Browser struct {
	proc    *process
	c       cdp.Caller
	Product string // e.g. "HeadlessChrome/156.0.8078.108"

	net     *netTracker
	tabs    []*Tab
	cur     int
	width   int
	height  int
	closing atomic.Bool
}

// connect attaches to the first page of a fresh Chromium.
func connect(ctx context.Context, p *process, width, height int) (*Browser, error) {
	b := &Browser{proc: p, c: p.conn, width: width, height: height, net: newNetTracker()}
	var ver struct {
		Product string `json:"product"`
	}
	if err := b.c.Call(ctx, "", "Browser.getVersion", nil, &ver); err != nil {
		return nil, err
	}
	b.Product = ver.Product
	go b.acceptDialogs()
	go b.trackNetwork()
	var targets struct {
		TargetInfos []struct {
			TargetID string `json:"targetId"`
			Type     string `json:"type"`
		} `json:"targetInfos"`
	}
	if err := b.c.Call(ctx, "", "Target.getTargets", nil, &targets); err != nil {
		return nil, err
	}
	for _, t := range targets.TargetInfos {
		if t.Type == "page" {
			tab, err := b.attach(ctx, t.TargetID)
			if err != nil {
				return nil, err
			}
			b.tabs = append(b.tabs, tab)
		}
	}
	if len(b.tabs) == 0 {
		if _, err := b.NewTab(ctx, "about:blank"); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// acceptDialogs accepts every JavaScript dialog (alert, confirm, prompt with
// its default text, beforeunload) as soon as it opens: an open dialog blocks
// the page, so every later command would time out. It ends with the
// connection.
func (b *Browser) acceptDialogs() {
	events, stop := b.c.Subscribe("Page.javascriptDialogOpening")
	defer stop()
	for ev := range events {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = b.c.Call(ctx, ev.SessionID, "Page.handleJavaScriptDialog", map[string]any{"accept": true}, nil)
		cancel()
	}
}

// attach opens a flat session on a page and enables what the commands use.
func (b *Browser) attach(ctx context.Context, targetID string) (*Tab, error) {
	var res struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.c.Call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": targetID, "flatten": true}, &res); err != nil {
		return nil, err
	}
	t := &Tab{TargetID: targetID, SessionID: res.SessionID}
	if err := b.c.Call(ctx, t.SessionID, "Page.enable", nil, nil); err != nil {
		return nil, err
	}
	if err := b.c.Call(ctx, t.SessionID, "Page.setLifecycleEventsEnabled", map[string]any{"enabled": true}, nil); err != nil {
		return nil, err
	}
	// Request events feed `wait --load networkidle` (netTracker).
	if err := b.c.Call(ctx, t.SessionID, "Network.enable", map[string]any{"maxTotalBufferSize": 0, "maxResourceBufferSize": 0}, nil); err != nil {
		return nil, err
	}
	return t, nil
}

// Tab returns the current tab.
func (b *Browser) Tab() *Tab { return b.tabs[b.cur] }

func (b *Browser) call(ctx context.Context, method string, params, result any) error {
	return b.c.Call(ctx, b.Tab().SessionID, method, params, result)
}

// ---- navigation ----

// NormalizeURL adds https:// to a bare host name, as agent-browser does;
// about:, data:, file: and http(s) URLs are kept.
func NormalizeURL(u string) string {
	if u == "" {
		return u
	}
	lower := strings.ToLower(u)
	for _, p := range []string{"http://", "https://", "about:", "data:", "file:", "chrome:", "blob:"} {
		if strings.HasPrefix(lower, p) {
			return u
		}
	}
	if strings.HasPrefix(lower, "localhost") || strings.HasPrefix(lower, "127.") || strings.HasPrefix(lower, "[::1]") {
		return "http://" + u
	}
	return "https://" + u
}

// Navigate opens url in the current tab and waits for its load event.
// Chromium aborts loads with ERR_NETWORK_CHANGED when the machine's network
// interfaces change (a container network appears or goes); such a load is
// tried again, twice at most.
func (b *Browser) Navigate(ctx context.Context, url string) error {
	url = NormalizeURL(url)
	for attempt := 1; ; attempt++ {
		err := b.navigate(ctx, url)
		var ue *UserError
		if attempt < 3 && errors.As(err, &ue) && strings.HasSuffix(ue.Msg, "net::ERR_NETWORK_CHANGED") {
			continue
		}
		return err
	}
}

func (b *Browser) navigate(ctx context.Context, url string) error {
	g := b.guardNavigation()
	defer g.stop()
	var res struct {
		LoaderID  string `json:"loaderId"`
		ErrorText string `json:"errorText"`
	}
	if err := b.call(ctx, "Page.navigate", map[string]any{"url": url}, &res); err != nil {
		var ce *cdp.Error
		if errors.As(err, &ce) {
			return userErrorf("cannot open %s: %s", url, ce.Message)
		}
		return err
	}
	b.Tab().refs = nil
	if res.ErrorText != "" {
		return userErrorf("cannot open %s: %s", url, res.ErrorText)
	}
	if res.LoaderID == "" {
		return nil // same-document navigation: no load event
	}
	return g.until(ctx, true)
}

// History goes back (delta -1) or forward (+1); it reports false when there
// is no such entry.
func (b *Browser) History(ctx context.Context, delta int) (bool, error) {
	var h struct {
		CurrentIndex int `json:"currentIndex"`
		Entries      []struct {
			ID int `json:"id"`
		} `json:"entries"`
	}
	if err := b.call(ctx, "Page.getNavigationHistory", nil, &h); err != nil {
		return false, err
	}
	i := h.CurrentIndex + delta
	if i < 0 || i >= len(h.Entries) {
		return false, nil
	}
	g := b.guardNavigation()
	defer g.stop()
	if err := b.call(ctx, "Page.navigateToHistoryEntry", map[string]any{"entryId": h.Entries[i].ID}, nil); err != nil {
		return false, err
	}
	b.Tab().refs = nil
	return true, g.until(ctx, true)
}

// Reload reloads the current page and waits for its load event.
func (b *Browser) Reload(ctx context.Context) error {
	g := b.guardNavigation()
	defer g.stop()
	if err := b.call(ctx, "Page.reload", nil, nil); err != nil {
		return err
	}
	b.Tab().refs = nil
	return g.until(ctx, true)
}

// navigationGuard notices when an action (a click, a key press) starts a
// navigation of the main frame, so the action can wait for the new page's
// load event before it returns: the next command then sees the new page.
type navigationGuard struct {
	b      *Browser
	events <-chan cdp.Event
	stop   func()
}

func (b *Browser) guardNavigation() *navigationGuard {
	ev, stop := b.c.Subscribe("Page.frameRequestedNavigation", "Page.frameStartedLoading", "Page.frameStoppedLoading",
		"Page.loadEventFired", "Page.navigatedWithinDocument", "Page.frameNavigated")
	return &navigationGuard{b: b, events: ev, stop: stop}
}

// wait lets the page run the tasks the action queued, then, if the main
// frame started a navigation meanwhile, waits until it ends: the load event,
// the frame stopping loading (a 204 answer, a download) or a same-document
// navigation (a fragment link, pushState).
func (g *navigationGuard) wait(ctx context.Context) error {
	defer g.stop()
	// A promise resolved by a zero timeout: the renderer has run the tasks
	// queued before it (a form submission schedules its navigation so).
	_, _ = g.b.evaluate(ctx, "new Promise(r => setTimeout(r, 0))", true)
	return g.until(ctx, false)
}

// until waits for the end of a navigation of the main frame; unless started,
// it returns at once when none starts within a short grace time.
func (g *navigationGuard) until(ctx context.Context, started bool) error {
	tab := g.b.Tab()
	// The main frame of a page target has the target's id.
	mainFrame := func(ev cdp.Event) bool {
		var p struct {
			FrameID string `json:"frameId"`
			Frame   struct {
				ID       string `json:"id"`
				ParentID string `json:"parentId"`
			} `json:"frame"`
		}
		if json.Unmarshal(ev.Params, &p) != nil {
			return false
		}
		if p.Frame.ID != "" {
			return p.Frame.ParentID == ""
		}
		return p.FrameID == tab.TargetID
	}
	var graceC <-chan time.Time
	if !started {
		grace := time.NewTimer(5 * time.Millisecond)
		defer grace.Stop()
		graceC = grace.C
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-graceC:
			if !started {
				return nil
			}
		case ev, ok := <-g.events:
			if !ok {
				return cdp.ErrClosed
			}
			if ev.SessionID != tab.SessionID {
				continue
			}
			switch ev.Method {
			case "Page.loadEventFired":
				if started {
					return nil
				}
			case "Page.frameNavigated":
				if mainFrame(ev) {
					tab.refs = nil
				}
			case "Page.frameStoppedLoading", "Page.navigatedWithinDocument":
				if started && mainFrame(ev) {
					return nil
				}
			default: // requested or started
				if mainFrame(ev) {
					started = true
				}
			}
		}
	}
}

// ---- tabs ----

// TabInfo is one line of `tab`.
type TabInfo struct {
	Index   int
	Title   string
	URL     string
	Current bool
}

type targetInfos struct {
	TargetInfos []struct {
		TargetID string `json:"targetId"`
		Type     string `json:"type"`
		Title    string `json:"title"`
		URL      string `json:"url"`
	} `json:"targetInfos"`
}

// syncTabs adds the pages opened by pages (window.open, target=_blank) to
// the tabs and drops the tabs that pages closed themselves.
func (b *Browser) syncTabs(ctx context.Context) (targetInfos, error) {
	var res targetInfos
	if err := b.c.Call(ctx, "", "Target.getTargets", nil, &res); err != nil {
		return res, err
	}
	live := map[string]bool{}
	for _, ti := range res.TargetInfos {
		if ti.Type != "page" {
			continue
		}
		live[ti.TargetID] = true
		if !slices.ContainsFunc(b.tabs, func(t *Tab) bool { return t.TargetID == ti.TargetID }) {
			t, err := b.attach(ctx, ti.TargetID)
			if targetGone(err) {
				// A page that is closing (a closed tab, window.close())
				// is still listed for a moment: it is no tab.
				delete(live, ti.TargetID)
				continue
			}
			if err != nil {
				return res, err
			}
			b.tabs = append(b.tabs, t)
		}
	}
	cur := b.tabs[b.cur]
	b.tabs = slices.DeleteFunc(b.tabs, func(t *Tab) bool { return !live[t.TargetID] })
	if len(b.tabs) == 0 {
		b.cur = 0
		_, err := b.NewTab(ctx, "about:blank")
		return res, err
	}
	b.cur = max(0, slices.Index(b.tabs, cur))
	return res, nil
}

// targetGone reports whether err says that the page a command addressed
// went away: it closed while the command was in flight, or before the
// command reached it.
func targetGone(err error) bool {
	if errors.Is(err, cdp.ErrTargetClosed) {
		return true
	}
	var ce *cdp.Error
	return errors.As(err, &ce) && (strings.Contains(ce.Message, "No target with given id") || strings.Contains(ce.Message, "Session with given id not found"))
}

// SyncTabs brings the tab list up to date with the pages that exist (see
// syncTabs): a command then never addresses a tab its page closed.
func (b *Browser) SyncTabs(ctx context.Context) error {
	_, err := b.syncTabs(ctx)
	return err
}

// Tabs lists the tabs.
func (b *Browser) Tabs(ctx context.Context) ([]TabInfo, error) {
	res, err := b.syncTabs(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]TabInfo, len(b.tabs))
	for i, t := range b.tabs {
		out[i] = TabInfo{Index: i, Current: i == b.cur}
		for _, ti := range res.TargetInfos {
			if ti.TargetID == t.TargetID {
				out[i].Title, out[i].URL = ti.Title, ti.URL
			}
		}
	}
	return out, nil
}

// NewTab opens a tab (at url, or about:blank), makes it current and returns
// its index.
func (b *Browser) NewTab(ctx context.Context, url string) (int, error) {
	var res struct {
		TargetID string `json:"targetId"`
	}
	if err := b.c.Call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &res); err != nil {
		return 0, err
	}
	t, err := b.attach(ctx, res.TargetID)
	if err != nil {
		return 0, err
	}
	b.tabs = append(b.tabs, t)
	b.cur = len(b.tabs) - 1
	if b.width != 0 {
		if err := b.applyViewport(ctx); err != nil {
			return b.cur, err
		}
	}
	if url != "" && url != "about:blank" {
		return b.cur, b.Navigate(ctx, url)
	}
	return b.cur, nil
}

// SwitchTab makes tab i current.
func (b *Browser) SwitchTab(ctx context.Context, i int) error {
	if _, err := b.syncTabs(ctx); err != nil {
		return err
	}
	if i < 0 || i >= len(b.tabs) {
		return userErrorf("no tab %d (there are %d; see `tab`)", i, len(b.tabs))
	}
	if err := b.c.Call(ctx, "", "Target.activateTarget", map[string]any{"targetId": b.tabs[i].TargetID}, nil); err != nil {
		return err
	}
	b.cur = i
	return nil
}

// CloseTab closes tab i; the last tab cannot be closed (use close).
func (b *Browser) CloseTab(ctx context.Context, i int) error {
	if i < 0 || i >= len(b.tabs) {
		return userErrorf("no tab %d (there are %d; see `tab`)", i, len(b.tabs))
	}
	if len(b.tabs) == 1 {
		return userErrorf("cannot close the last tab (use `close` to close the browser)")
	}
	if err := b.c.Call(ctx, "", "Target.closeTarget", map[string]any{"targetId": b.tabs[i].TargetID}, nil); err != nil {
		return err
	}
	b.tabs = append(b.tabs[:i], b.tabs[i+1:]...)
	if b.cur >= i && b.cur > 0 {
		b.cur--
	}
	return nil
}

// ---- page-level reads and settings ----

// evaluate runs expression in the page and returns its value as JSON.
func (b *Browser) evaluate(ctx context.Context, expression string, await bool) (json.RawMessage, error) {
	var res evalResult
	err := b.call(ctx, "Runtime.evaluate", map[string]any{
		"expression": expression, "returnByValue": true, "awaitPromise": await, "userGesture": true,
	}, &res)
	if err != nil {
		return nil, err
	}
	return res.value()
}

type remoteObject struct {
	Type                string          `json:"type"`
	Subtype             string          `json:"subtype"`
	Value               json.RawMessage `json:"value"`
	UnserializableValue string          `json:"unserializableValue"`
	Description         string          `json:"description"`
	ObjectID            string          `json:"objectId"`
}

type evalResult struct {
	Result           remoteObject `json:"result"`
	ExceptionDetails *struct {
		Text      string        `json:"text"`
		Exception *remoteObject `json:"exception"`
	} `json:"exceptionDetails"`
}

func (r evalResult) value() (json.RawMessage, error) {
	if e := r.ExceptionDetails; e != nil {
		msg := e.Text
		if e.Exception != nil && e.Exception.Description != "" {
			msg = e.Exception.Description
		}
		return nil, &UserError{Msg: "JavaScript error: " + firstLine(msg)}
	}
	switch {
	case r.Result.Type == "undefined":
		return json.RawMessage("undefined"), nil
	case r.Result.UnserializableValue != "":
		return json.RawMessage(r.Result.UnserializableValue), nil
	case r.Result.Value == nil:
		return json.RawMessage("null"), nil
	}
	return r.Result.Value, nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// Eval evaluates a JavaScript expression (promises are awaited) and returns
// its JSON value ("undefined" for undefined).
func (b *Browser) Eval(ctx context.Context, expr string) (json.RawMessage, error) {
	return b.evaluate(ctx, expr, true)
}

// EvalString evaluates expr, which must produce a string.
func (b *Browser) EvalString(ctx context.Context, expr string) (string, error) {
	v, err := b.evaluate(ctx, expr, false)
	if err != nil {
		return "", err
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", fmt.Errorf("evaluate %q: not a string: %s", expr, v)
	}
	return s, nil
}

// SetViewport sets the viewport of this and future tabs.
func (b *Browser) SetViewport(ctx context.Context, w, h int) error {
	b.width, b.height = w, h
	return b.applyViewport(ctx)
}

func (b *Browser) applyViewport(ctx context.Context) error {
	return b.call(ctx, "Emulation.setDeviceMetricsOverride", map[string]any{
		"width": b.width, "height": b.height, "deviceScaleFactor": 1, "mobile": false,
	}, nil)
}

// Cookie is one cookie.
type Cookie struct {
	Name     string  `json:"name"`
	Value    string  `json:"value"`
	Domain   string  `json:"domain"`
	Path     string  `json:"path"`
	Expires  float64 `json:"expires"`
	HTTPOnly bool    `json:"httpOnly"`
	Secure   bool    `json:"secure"`
}

// Cookies lists all cookies of the browser.
func (b *Browser) Cookies(ctx context.Context) ([]Cookie, error) {
	var res struct {
		Cookies []Cookie `json:"cookies"`
	}
	if err := b.c.Call(ctx, "", "Storage.getCookies", nil, &res); err != nil {
		return nil, err
	}
	return res.Cookies, nil
}

// SetCookie sets a cookie for url (default: the current page's URL).
func (b *Browser) SetCookie(ctx context.Context, name, value, url string) error {
	if url == "" {
		u, err := b.EvalString(ctx, "location.href")
		if err != nil {
			return err
		}
		url = u
	}
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		return userErrorf("cookies set needs an http(s) page or --url (current: %s)", url)
	}
	var res struct {
		Success bool `json:"success"`
	}
	if err := b.call(ctx, "Network.setCookie", map[string]any{"name": name, "value": value, "url": url}, &res); err != nil {
		return err
	}
	if !res.Success {
		return userErrorf("the browser refused the cookie %s", name)
	}
	return nil
}

// ClearCookies removes all cookies.
func (b *Browser) ClearCookies(ctx context.Context) error {
	return b.c.Call(ctx, "", "Storage.clearCookies", nil, nil)
}

// Screenshot captures the viewport (or the full page) as PNG.
func (b *Browser) Screenshot(ctx context.Context, full bool) ([]byte, error) {
	params := map[string]any{"format": "png"}
	if full {
		var m struct {
			CSSContentSize struct {
				Width  float64 `json:"width"`
				Height float64 `json:"height"`
			} `json:"cssContentSize"`
		}
		if err := b.call(ctx, "Page.getLayoutMetrics", nil, &m); err != nil {
			return nil, err
		}
		w, h := m.CSSContentSize.Width, min(m.CSSContentSize.Height, 16384)
		params["clip"] = map[string]any{"x": 0, "y": 0, "width": w, "height": h, "scale": 1}
		params["captureBeyondViewport"] = true
	}
	var res struct {
		Data []byte `json:"data"` // base64 in JSON
	}
	if err := b.call(ctx, "Page.captureScreenshot", params, &res); err != nil {
		return nil, err
	}
	return res.Data, nil
}

// PDF prints the page as PDF.
func (b *Browser) PDF(ctx context.Context) ([]byte, error) {
	var res struct {
		Data []byte `json:"data"`
	}
	if err := b.call(ctx, "Page.printToPDF", map[string]any{"printBackground": true}, &res); err != nil {
		return nil, err
	}
	return res.Data, nil
}

// Release frees the page objects a command resolved.
func (b *Browser) Release(ctx context.Context) {
	_ = b.call(ctx, "Runtime.releaseObjectGroup", map[string]any{"objectGroup": objectGroup}, nil)
}

// Call sends one raw DevTools command to the current tab (benchmarks use it
// as the floor gull's commands are compared with).
func (b *Browser) Call(ctx context.Context, method string, params, result any) error {
	return b.call(ctx, method, params, result)
}
