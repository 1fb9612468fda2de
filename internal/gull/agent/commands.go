package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shipyard-dev/shipyard/internal/gull/browser"
)

type command struct {
	run       func(ctx context.Context, r *Runner, b *browser.Browser, args []string) (string, error)
	noBrowser func(ctx context.Context, r *Runner, args []string) (string, error)
}

var commands map[string]command

func init() {
	commands = map[string]command{
		"open":           {run: cmdOpen},
		"goto":           {run: cmdOpen},
		"navigate":       {run: cmdOpen},
		"back":           {run: cmdHistory(-1)},
		"forward":        {run: cmdHistory(1)},
		"reload":         {run: cmdReload},
		"close":          {noBrowser: cmdClose},
		"snapshot":       {run: cmdSnapshot},
		"click":          {run: cmdClick(1)},
		"dblclick":       {run: cmdClick(2)},
		"fill":           {run: cmdFill},
		"type":           {run: cmdType},
		"press":          {run: cmdPress},
		"key":            {run: cmdPress},
		"hover":          {run: cmdElement("Hovered", (*browser.Browser).Hover)},
		"focus":          {run: cmdElement("Focused", (*browser.Browser).Focus)},
		"select":         {run: cmdSelect},
		"check":          {run: cmdCheck(true)},
		"uncheck":        {run: cmdCheck(false)},
		"scroll":         {run: cmdScroll},
		"scrollintoview": {run: cmdScrollIntoView},
		"get":            {run: cmdGet},
		"is":             {run: cmdIs},
		"eval":           {run: cmdEval},
		"wait":           {run: cmdWait},
		"screenshot":     {run: cmdScreenshot},
		"pdf":            {run: cmdPDF},
		"tab":            {run: cmdTab},
		"cookies":        {run: cmdCookies},
		"set":            {run: cmdSet},
		"session":        {noBrowser: cmdSession},
		"--version":      {noBrowser: cmdVersion},
		"-V":             {noBrowser: cmdVersion},
	}
}

func commandList() string {
	names := slices.Sorted(maps.Keys(commands))
	return strings.Join(names, ", ")
}

// args checks the number of arguments.
func nargs(name string, args []string, min, max int, form string) error {
	if len(args) < min || max >= 0 && len(args) > max {
		return usage("usage: %s", strings.TrimSpace(name+" "+form))
	}
	return nil
}

func cmdVersion(_ context.Context, r *Runner, _ []string) (string, error) {
	return fmt.Sprintf("gull %s (agent-browser command language over the Chrome DevTools protocol)\n", r.Version), nil
}

func cmdSession(_ context.Context, r *Runner, args []string) (string, error) {
	if len(args) == 0 || args[0] == "list" {
		return r.Session + "\n", nil
	}
	return "", usage("unsupported: session %s (gull has one session per sandbox: %s)", args[0], r.Session)
}

func cmdClose(ctx context.Context, r *Runner, args []string) (string, error) {
	if err := nargs("close", args, 0, 0, ""); err != nil {
		return "", err
	}
	if r.Browsers.CloseBrowser(ctx) {
		return "Browser closed\n", nil
	}
	return "Browser was not running\n", nil
}

func pageLine(ctx context.Context, b *browser.Browser) (string, error) {
	title, err := b.EvalString(ctx, "document.title")
	if err != nil {
		return "", err
	}
	u, err := b.EvalString(ctx, "location.href")
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s\n%s\n", title, u), nil
}

func cmdOpen(ctx context.Context, _ *Runner, b *browser.Browser, args []string) (string, error) {
	if err := nargs("open", args, 1, 1, "<url>"); err != nil {
		return "", err
	}
	if err := b.Navigate(ctx, args[0]); err != nil {
		return "", err
	}
	return pageLine(ctx, b)
}

func cmdHistory(delta int) func(context.Context, *Runner, *browser.Browser, []string) (string, error) {
	return func(ctx context.Context, _ *Runner, b *browser.Browser, args []string) (string, error) {
		if len(args) != 0 {
			return "", usage("back and forward take no arguments")
		}
		ok, err := b.History(ctx, delta)
		if err != nil {
			return "", err
		}
		if !ok {
			return "", usage("no page to go %s to", map[int]string{-1: "back", 1: "forward"}[delta])
		}
		return pageLine(ctx, b)
	}
}

func cmdReload(ctx context.Context, _ *Runner, b *browser.Browser, args []string) (string, error) {
	if err := nargs("reload", args, 0, 0, ""); err != nil {
		return "", err
	}
	if err := b.Reload(ctx); err != nil {
		return "", err
	}
	return pageLine(ctx, b)
}

// ParseSnapshotArgs parses `snapshot [-i] [-c] [-d N] [-s css]` (flags may be
// combined: -ic).
func ParseSnapshotArgs(args []string) (browser.SnapshotOptions, error) {
	var o browser.SnapshotOptions
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch a {
		case "-i", "--interactive":
			o.Interactive = true
		case "-c", "--compact":
			o.Compact = true
		case "-d", "--depth":
			if i+1 >= len(args) {
				return o, usage("snapshot %s needs a number", a)
			}
			i++
			n, err := strconv.Atoi(args[i])
			if err != nil || n < 1 || n > 1000 {
				return o, usage("snapshot -d wants a depth from 1 to 1000, not %q", args[i])
			}
			o.MaxDepth = n
		case "-s", "--selector":
			if i+1 >= len(args) {
				return o, usage("snapshot %s needs a CSS selector", a)
			}
			i++
			o.Selector = args[i]
		default:
			if len(a) > 2 && a[0] == '-' && a[1] != '-' && strings.Trim(a[1:], "ic") == "" {
				o.Interactive = o.Interactive || strings.Contains(a, "i")
				o.Compact = o.Compact || strings.Contains(a, "c")
				continue
			}
			return o, usage("unsupported snapshot option %q (use -i, -c, -d N, -s selector)", a)
		}
	}
	return o, nil
}

func cmdSnapshot(ctx context.Context, _ *Runner, b *browser.Browser, args []string) (string, error) {
	o, err := ParseSnapshotArgs(args)
	if err != nil {
		return "", err
	}
	return b.Snapshot(ctx, o)
}

func cmdClick(count int) func(context.Context, *Runner, *browser.Browser, []string) (string, error) {
	return func(ctx context.Context, _ *Runner, b *browser.Browser, args []string) (string, error) {
		args = joinText(args)
		if err := nargs("click", args, 1, 1, "<selector>"); err != nil {
			return "", err
		}
		e, err := b.Resolve(ctx, args[0])
		if err != nil {
			return "", err
		}
		if err := b.Click(ctx, e, count); err != nil {
			return "", err
		}
		return "Clicked " + args[0] + "\n", nil
	}
}

// joinText lets a command whose only argument is a selector take an
// unquoted text selector: `click text=Sign in`.
func joinText(args []string) []string {
	if len(args) > 1 && strings.HasPrefix(args[0], "text=") {
		return []string{strings.Join(args, " ")}
	}
	return args
}

func cmdFill(ctx context.Context, _ *Runner, b *browser.Browser, args []string) (string, error) {
	if err := nargs("fill", args, 2, 2, "<selector> <text>"); err != nil {
		return "", err
	}
	e, err := b.Resolve(ctx, args[0])
	if err != nil {
		return "", err
	}
	if err := b.Fill(ctx, e, args[1]); err != nil {
		return "", err
	}
	return "Filled " + args[0] + "\n", nil
}

func cmdType(ctx context.Context, _ *Runner, b *browser.Browser, args []string) (string, error) {
	if err := nargs("type", args, 2, 2, "<selector> <text>"); err != nil {
		return "", err
	}
	e, err := b.Resolve(ctx, args[0])
	if err != nil {
		return "", err
	}
	if err := b.Type(ctx, e, args[1]); err != nil {
		return "", err
	}
	return "Typed into " + args[0] + "\n", nil
}

func cmdPress(ctx context.Context, _ *Runner, b *browser.Browser, args []string) (string, error) {
	if err := nargs("press", args, 1, 2, "<key> [selector]"); err != nil {
		return "", err
	}
	var e *browser.Element
	if len(args) == 2 {
		var err error
		if e, err = b.Resolve(ctx, args[1]); err != nil {
			return "", err
		}
	}
	if err := b.Press(ctx, args[0], e); err != nil {
		return "", err
	}
	return "Pressed " + args[0] + "\n", nil
}

func cmdElement(verb string, fn func(*browser.Browser, context.Context, *browser.Element) error) func(context.Context, *Runner, *browser.Browser, []string) (string, error) {
	return func(ctx context.Context, _ *Runner, b *browser.Browser, args []string) (string, error) {
		args = joinText(args)
		if err := nargs(strings.ToLower(strings.TrimSuffix(verb, "ed")), args, 1, 1, "<selector>"); err != nil {
			return "", err
		}
		e, err := b.Resolve(ctx, args[0])
		if err != nil {
			return "", err
		}
		if err := fn(b, ctx, e); err != nil {
			return "", err
		}
		return verb + " " + args[0] + "\n", nil
	}
}

func cmdSelect(ctx context.Context, _ *Runner, b *browser.Browser, args []string) (string, error) {
	if err := nargs("select", args, 2, -1, "<selector> <value> [value...]"); err != nil {
		return "", err
	}
	e, err := b.Resolve(ctx, args[0])
	if err != nil {
		return "", err
	}
	vals, err := b.SelectOptions(ctx, e, args[1:])
	if err != nil {
		return "", err
	}
	return "Selected " + strings.Join(vals, ", ") + "\n", nil
}

func cmdCheck(want bool) func(context.Context, *Runner, *browser.Browser, []string) (string, error) {
	return func(ctx context.Context, _ *Runner, b *browser.Browser, args []string) (string, error) {
		if err := nargs("check", args, 1, 1, "<selector>"); err != nil {
			return "", err
		}
		e, err := b.Resolve(ctx, args[0])
		if err != nil {
			return "", err
		}
		if err := b.SetChecked(ctx, e, want); err != nil {
			return "", err
		}
		if want {
			return "Checked " + args[0] + "\n", nil
		}
		return "Unchecked " + args[0] + "\n", nil
	}
}

func cmdScroll(ctx context.Context, _ *Runner, b *browser.Browser, args []string) (string, error) {
	if err := nargs("scroll", args, 1, 2, "<up|down|left|right> [pixels]"); err != nil {
		return "", err
	}
	px := 300
	if len(args) == 2 {
		n, err := strconv.Atoi(args[1])
		if err != nil || n < 1 || n > 1_000_000 {
			return "", usage("scroll wants pixels from 1 to 1000000, not %q", args[1])
		}
		px = n
	}
	var dx, dy int
	switch args[0] {
	case "up":
		dy = -px
	case "down":
		dy = px
	case "left":
		dx = -px
	case "right":
		dx = px
	default:
		return "", usage("scroll direction must be up, down, left or right, not %q", args[0])
	}
	if err := b.Scroll(ctx, dx, dy); err != nil {
		return "", err
	}
	return fmt.Sprintf("Scrolled %s %dpx\n", args[0], px), nil
}

func cmdScrollIntoView(ctx context.Context, _ *Runner, b *browser.Browser, args []string) (string, error) {
	if err := nargs("scrollintoview", args, 1, 1, "<selector>"); err != nil {
		return "", err
	}
	e, err := b.Resolve(ctx, args[0])
	if err != nil {
		return "", err
	}
	if err := b.Do(ctx, e, "function(){this.scrollIntoView({block:'center',behavior:'instant'})}", nil); err != nil {
		return "", err
	}
	return "Scrolled " + args[0] + " into view\n", nil
}

// elementReads are the `get` subcommands that read one element.
var elementReads = map[string]string{
	"text":  "function(){return this.innerText ?? this.textContent ?? ''}",
	"html":  "function(){return this.innerHTML}",
	"value": "function(){return this.value ?? ''}",
}

func cmdGet(ctx context.Context, _ *Runner, b *browser.Browser, args []string) (string, error) {
	if len(args) == 0 {
		return "", usage("usage: get <text|html|value|attr|title|url|count> ...")
	}
	what, rest := args[0], args[1:]
	switch what {
	case "title", "url":
		if err := nargs("get "+what, rest, 0, 0, ""); err != nil {
			return "", err
		}
		v, err := b.EvalString(ctx, map[string]string{"title": "document.title", "url": "location.href"}[what])
		return v + "\n", err
	case "count":
		if err := nargs("get count", rest, 1, 1, "<css selector>"); err != nil {
			return "", err
		}
		n, err := b.Count(ctx, rest[0])
		return strconv.Itoa(n) + "\n", err
	case "attr":
		if err := nargs("get attr", rest, 2, 2, "<selector> <attribute>"); err != nil {
			return "", err
		}
		e, err := b.Resolve(ctx, rest[0])
		if err != nil {
			return "", err
		}
		var v *string
		if err := b.Do(ctx, e, "function(n){return this.getAttribute(n)}", &v, rest[1]); err != nil {
			return "", err
		}
		if v == nil {
			return "", usage("element %s has no attribute %s", rest[0], rest[1])
		}
		return *v + "\n", nil
	}
	fn, ok := elementReads[what]
	if !ok {
		return "", usage("unsupported: get %s (use text, html, value, attr, title, url or count)", what)
	}
	if err := nargs("get "+what, rest, 1, 1, "<selector>"); err != nil {
		return "", err
	}
	e, err := b.Resolve(ctx, rest[0])
	if err != nil {
		return "", err
	}
	var v string
	if err := b.Do(ctx, e, fn, &v); err != nil {
		return "", err
	}
	return v + "\n", nil
}

func cmdIs(ctx context.Context, _ *Runner, b *browser.Browser, args []string) (string, error) {
	if err := nargs("is", args, 2, 2, "<visible|enabled|checked> <selector>"); err != nil {
		return "", err
	}
	e, err := b.Resolve(ctx, args[1])
	if err != nil {
		return "", err
	}
	var v bool
	switch args[0] {
	case "visible":
		v, err = b.Visible(ctx, e)
	case "enabled":
		err = b.Do(ctx, e, "function(){return !this.disabled && this.getAttribute('aria-disabled') !== 'true'}", &v)
	case "checked":
		v, err = b.Checked(ctx, e)
	default:
		return "", usage("unsupported: is %s (use visible, enabled or checked)", args[0])
	}
	return strconv.FormatBool(v) + "\n", err
}

func cmdEval(ctx context.Context, _ *Runner, b *browser.Browser, args []string) (string, error) {
	if len(args) == 0 {
		return "", usage("usage: eval <javascript>")
	}
	v, err := b.Eval(ctx, strings.Join(args, " "))
	if err != nil {
		return "", err
	}
	return FormatValue(v) + "\n", nil
}

// FormatValue prints a JSON value: a string as its text, anything else as
// JSON.
func FormatValue(v json.RawMessage) string {
	var s string
	if len(v) > 0 && v[0] == '"' && json.Unmarshal(v, &s) == nil {
		return s
	}
	return string(v)
}

// pollEvery is the polling interval of wait.
const pollEvery = 100 * time.Millisecond

// poll evaluates cond until it is true or ctx ends.
func poll(ctx context.Context, cond func() (bool, error)) error {
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollEvery):
		}
	}
}

// GlobToRegexp turns a URL pattern (`**` any text, `*` any text without
// '/') into an anchored regular expression; a pattern without wildcards
// matches as a substring.
func GlobToRegexp(p string) *regexp.Regexp {
	if !strings.Contains(p, "*") {
		return regexp.MustCompile(regexp.QuoteMeta(p))
	}
	var sb strings.Builder
	sb.WriteString("^")
	for i := 0; i < len(p); i++ {
		switch {
		case strings.HasPrefix(p[i:], "**"):
			sb.WriteString(".*")
			i++
		case p[i] == '*':
			sb.WriteString("[^/]*")
		default:
			sb.WriteString(regexp.QuoteMeta(p[i : i+1]))
		}
	}
	sb.WriteString("$")
	return regexp.MustCompile(sb.String())
}

func cmdWait(ctx context.Context, _ *Runner, b *browser.Browser, args []string) (string, error) {
	if len(args) == 0 {
		return "", usage("usage: wait <ms|selector|@ref> | --load [state] | --url <pattern> | --text <text> | --fn <js>")
	}
	switch args[0] {
	case "--load":
		state := "load"
		if len(args) > 1 {
			state = args[1]
		}
		if state == "networkidle" {
			return "Network idle\n", b.NetworkIdle(ctx, networkQuiet)
		}
		want := map[string]string{
			"load": "document.readyState === 'complete'", "domcontentloaded": "document.readyState !== 'loading'",
		}[state]
		if want == "" {
			return "", usage("wait --load wants load, domcontentloaded or networkidle, not %q", state)
		}
		return "Loaded\n", poll(ctx, func() (bool, error) { return evalBool(ctx, b, want) })
	case "--url", "-u":
		if err := nargs("wait --url", args[1:], 1, 1, "<pattern>"); err != nil {
			return "", err
		}
		re := GlobToRegexp(args[1])
		return "URL matched\n", poll(ctx, func() (bool, error) {
			u, err := b.EvalString(ctx, "location.href")
			return re.MatchString(u), err
		})
	case "--text", "-t":
		if err := nargs("wait --text", args[1:], 1, 1, "<text>"); err != nil {
			return "", err
		}
		expr := "(document.body ? document.body.innerText : '').includes(" + mustJSON(args[1]) + ")"
		return "Text found\n", poll(ctx, func() (bool, error) { return evalBool(ctx, b, expr) })
	case "--fn", "-f":
		if len(args) < 2 {
			return "", usage("usage: wait --fn <javascript condition>")
		}
		expr := "!!(" + strings.Join(args[1:], " ") + ")"
		return "Condition met\n", poll(ctx, func() (bool, error) { return evalBool(ctx, b, expr) })
	}
	if err := nargs("wait", args, 1, 1, "<ms|selector>"); err != nil {
		return "", err
	}
	if ms, err := strconv.Atoi(args[0]); err == nil {
		if ms < 0 || ms > 600_000 {
			return "", usage("wait wants 0 to 600000 ms, not %d", ms)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(time.Duration(ms) * time.Millisecond):
		}
		return fmt.Sprintf("Waited %dms\n", ms), nil
	}
	sel := args[0]
	err := poll(ctx, func() (bool, error) {
		e, err := b.Resolve(ctx, sel)
		if err != nil {
			if _, ok := browser.RefOf(sel); ok {
				return false, err // a ref does not come back
			}
			var ue *browser.UserError
			if errors.As(err, &ue) {
				if strings.HasPrefix(ue.Msg, "invalid selector") {
					return false, err
				}
				return false, nil
			}
			return false, err
		}
		return b.Visible(ctx, e)
	})
	if err != nil {
		return "", err
	}
	return "Found " + sel + "\n", nil
}

// networkQuiet is how long no request may start or end for the network to
// count as idle.
const networkQuiet = 500 * time.Millisecond

func evalBool(ctx context.Context, b *browser.Browser, expr string) (bool, error) {
	v, err := b.Eval(ctx, expr)
	if err != nil {
		return false, err
	}
	return string(v) == "true", nil
}

func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func cmdScreenshot(ctx context.Context, r *Runner, b *browser.Browser, args []string) (string, error) {
	var p string
	full := false
	for _, a := range args {
		switch {
		case a == "--full" || a == "-f" || a == "--full-page":
			full = true
		case strings.HasPrefix(a, "-"):
			return "", usage("unsupported screenshot option %q (use [path] [--full])", a)
		case p == "":
			p = a
		default:
			return "", usage("usage: screenshot [path] [--full]")
		}
	}
	if p == "" {
		p = path.Join("screenshots", time.Now().UTC().Format("20060102-150405.000")+".png")
	}
	if _, err := r.outputPath(p); err != nil {
		return "", err
	}
	png, err := b.Screenshot(ctx, full)
	if err != nil {
		return "", err
	}
	abs, err := r.writeFile(p, png)
	if err != nil {
		return "", err
	}
	return "Screenshot saved to " + abs + "\n", nil
}

func cmdPDF(ctx context.Context, r *Runner, b *browser.Browser, args []string) (string, error) {
	if err := nargs("pdf", args, 1, 1, "<path>"); err != nil {
		return "", err
	}
	if _, err := r.outputPath(args[0]); err != nil {
		return "", err
	}
	data, err := b.PDF(ctx)
	if err != nil {
		return "", err
	}
	abs, err := r.writeFile(args[0], data)
	if err != nil {
		return "", err
	}
	return "PDF saved to " + abs + "\n", nil
}

func tabIndex(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimPrefix(s, "t"))
	if err != nil || n < 0 || n > 10_000 {
		return 0, usage("not a tab number: %q (see `tab`)", s)
	}
	return n, nil
}

func cmdTab(ctx context.Context, _ *Runner, b *browser.Browser, args []string) (string, error) {
	if len(args) == 0 || args[0] == "list" {
		tabs, err := b.Tabs(ctx)
		if err != nil {
			return "", err
		}
		var sb strings.Builder
		for _, t := range tabs {
			mark := " "
			if t.Current {
				mark = "*"
			}
			fmt.Fprintf(&sb, "%s [%d] %s - %s\n", mark, t.Index, t.Title, t.URL)
		}
		return sb.String(), nil
	}
	switch args[0] {
	case "new":
		if err := nargs("tab new", args[1:], 0, 1, "[url]"); err != nil {
			return "", err
		}
		u := ""
		if len(args) == 2 {
			u = args[1]
		}
		i, err := b.NewTab(ctx, u)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("Opened tab [%d]\n", i), nil
	case "close":
		if err := nargs("tab close", args[1:], 0, 1, "[n]"); err != nil {
			return "", err
		}
		i := -1
		if len(args) == 2 {
			var err error
			if i, err = tabIndex(args[1]); err != nil {
				return "", err
			}
		} else {
			tabs, err := b.Tabs(ctx)
			if err != nil {
				return "", err
			}
			for _, t := range tabs {
				if t.Current {
					i = t.Index
				}
			}
		}
		if err := b.CloseTab(ctx, i); err != nil {
			return "", err
		}
		return fmt.Sprintf("Closed tab [%d]\n", i), nil
	}
	if err := nargs("tab", args, 1, 1, "[list | new [url] | <n> | close [n]]"); err != nil {
		return "", err
	}
	i, err := tabIndex(args[0])
	if err != nil {
		return "", err
	}
	if err := b.SwitchTab(ctx, i); err != nil {
		return "", err
	}
	return fmt.Sprintf("Switched to tab [%d]\n", i), nil
}

func cmdCookies(ctx context.Context, _ *Runner, b *browser.Browser, args []string) (string, error) {
	if len(args) == 0 || args[0] == "get" || args[0] == "list" {
		cs, err := b.Cookies(ctx)
		if err != nil {
			return "", err
		}
		if len(cs) == 0 {
			return "(no cookies)\n", nil
		}
		var sb strings.Builder
		for _, c := range cs {
			fmt.Fprintf(&sb, "%s=%s; domain=%s; path=%s", c.Name, c.Value, c.Domain, c.Path)
			if c.HTTPOnly {
				sb.WriteString("; httponly")
			}
			if c.Secure {
				sb.WriteString("; secure")
			}
			sb.WriteByte('\n')
		}
		return sb.String(), nil
	}
	switch args[0] {
	case "set":
		rest := args[1:]
		u := ""
		if len(rest) == 4 && rest[2] == "--url" {
			u, rest = rest[3], rest[:2]
		}
		if err := nargs("cookies set", rest, 2, 2, "<name> <value> [--url <url>]"); err != nil {
			return "", err
		}
		if err := b.SetCookie(ctx, rest[0], rest[1], u); err != nil {
			return "", err
		}
		return "Cookie " + rest[0] + " set\n", nil
	case "clear":
		if err := b.ClearCookies(ctx); err != nil {
			return "", err
		}
		return "Cookies cleared\n", nil
	}
	return "", usage("unsupported: cookies %s (use cookies, cookies set <name> <value>, cookies clear)", args[0])
}

func cmdSet(ctx context.Context, _ *Runner, b *browser.Browser, args []string) (string, error) {
	if len(args) == 0 || args[0] != "viewport" {
		what := ""
		if len(args) > 0 {
			what = " " + args[0]
		}
		return "", usage("unsupported: set%s (gull implements set viewport <width> <height>)", what)
	}
	if err := nargs("set viewport", args[1:], 2, 2, "<width> <height>"); err != nil {
		return "", err
	}
	w, errW := strconv.Atoi(args[1])
	h, errH := strconv.Atoi(args[2])
	if errW != nil || errH != nil || w < 100 || h < 100 || w > 8192 || h > 8192 {
		return "", usage("viewport width and height must be 100 to 8192 pixels")
	}
	if err := b.SetViewport(ctx, w, h); err != nil {
		return "", err
	}
	return fmt.Sprintf("Viewport set to %dx%d\n", w, h), nil
}
