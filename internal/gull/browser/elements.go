package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/shipyard-dev/shipyard/internal/gull/cdp"
)

// objectGroup groups the page objects resolved by one command (released by
// Release).
const objectGroup = "gull"

// Element is a resolved page element.
type Element struct {
	objectID string
	sel      string
}

// findTextJS finds the innermost visible element whose text contains the
// argument (exact matches first, then elements inside something clickable).
const findTextJS = `(function(t){
  const all = [...document.querySelectorAll('body *')].filter(e => e.offsetParent !== null || e.getClientRects().length);
  const txt = e => (e.innerText || e.textContent || '').trim();
  const inner = list => list.filter(e => !list.some(o => o !== e && e.contains(o)));
  let hit = inner(all.filter(e => txt(e) === t));
  if (!hit.length) hit = inner(all.filter(e => txt(e).includes(t)));
  const act = 'a,button,input,select,textarea,label,summary,[role=button],[role=link],[role=tab],[role=menuitem],[onclick]';
  return hit.find(e => e.closest(act)) || hit[0] || null;
})`

// Resolve finds the element of a selector: @eN (a ref of the last snapshot),
// text=... (visible text), or a CSS selector.
func (b *Browser) Resolve(ctx context.Context, sel string) (*Element, error) {
	if sel == "" {
		return nil, userErrorf("empty selector")
	}
	if ref, ok := RefOf(sel); ok {
		node, ok := b.Tab().refs[ref]
		if !ok {
			return nil, userErrorf("unknown ref @%s: the page changed or no snapshot named it; run snapshot again", ref)
		}
		var res struct {
			Object remoteObject `json:"object"`
		}
		err := b.call(ctx, "DOM.resolveNode", map[string]any{"backendNodeId": node, "objectGroup": objectGroup}, &res)
		var ce *cdp.Error
		if errors.As(err, &ce) || err == nil && res.Object.ObjectID == "" {
			return nil, userErrorf("stale ref @%s: the element is gone; run snapshot again", ref)
		}
		if err != nil {
			return nil, err
		}
		var connected bool
		if err := b.callOn(ctx, res.Object.ObjectID, "function(){return this.isConnected}", nil, &connected); err != nil {
			return nil, err
		}
		if !connected {
			return nil, userErrorf("stale ref @%s: the element is gone; run snapshot again", ref)
		}
		return &Element{objectID: res.Object.ObjectID, sel: sel}, nil
	}
	var expr string
	if t, ok := strings.CutPrefix(sel, "text="); ok {
		t = strings.Trim(t, `"'`)
		expr = findTextJS + "(" + jsString(t) + ")"
	} else {
		expr = "document.querySelector(" + jsString(sel) + ")"
	}
	var res evalResult
	if err := b.call(ctx, "Runtime.evaluate", map[string]any{"expression": expr, "objectGroup": objectGroup}, &res); err != nil {
		return nil, err
	}
	if res.ExceptionDetails != nil {
		return nil, userErrorf("invalid selector %q", sel)
	}
	if res.Result.ObjectID == "" || res.Result.Subtype == "null" {
		return nil, userErrorf("element not found: %s", sel)
	}
	return &Element{objectID: res.Result.ObjectID, sel: sel}, nil
}

// RefOf reports whether sel is a ref (@e3, or ref=e3) and returns it (e3).
func RefOf(sel string) (string, bool) {
	r, ok := strings.CutPrefix(sel, "@")
	if !ok {
		r, ok = strings.CutPrefix(sel, "ref=")
	}
	if !ok || len(r) < 2 || r[0] != 'e' {
		return "", false
	}
	for _, c := range r[1:] {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	return r, true
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// callOn calls a JavaScript function with this = the element.
func (b *Browser) callOn(ctx context.Context, objectID, fn string, args []any, out any) error {
	jargs := make([]map[string]any, len(args))
	for i, a := range args {
		jargs[i] = map[string]any{"value": a}
	}
	var res evalResult
	err := b.call(ctx, "Runtime.callFunctionOn", map[string]any{
		"functionDeclaration": fn, "objectId": objectID, "arguments": jargs,
		"returnByValue": true, "awaitPromise": true, "userGesture": true,
	}, &res)
	if err != nil {
		return err
	}
	v, err := res.value()
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(v, out); err != nil {
		return fmt.Errorf("decode %s: %w", v, err)
	}
	return nil
}

// Do runs fn (a JavaScript function declaration) on the element and decodes
// its result into out.
func (b *Browser) Do(ctx context.Context, e *Element, fn string, out any, args ...any) error {
	return b.callOn(ctx, e.objectID, fn, args, out)
}

// center scrolls the element into view and returns its center in CSS pixels.
func (b *Browser) center(ctx context.Context, e *Element) (float64, float64, error) {
	var r []float64
	// Scrolling only when the element is not fully in view: a scroll makes
	// the next input event wait for a new frame.
	err := b.callOn(ctx, e.objectID, `function(){
  let r = this.getBoundingClientRect();
  if (r.top < 0 || r.left < 0 || r.bottom > innerHeight || r.right > innerWidth) {
    this.scrollIntoView({block:'center', inline:'center', behavior:'instant'});
    r = this.getBoundingClientRect();
  }
  return [r.left + r.width/2, r.top + r.height/2, r.width, r.height];
}`, nil, &r)
	if err != nil {
		return 0, 0, err
	}
	if len(r) != 4 || r[2] <= 0 || r[3] <= 0 || math.IsNaN(r[0]) {
		return 0, 0, userErrorf("element %s is not visible (it has no size)", e.sel)
	}
	return r[0], r[1], nil
}

func (b *Browser) mouse(ctx context.Context, typ string, x, y float64, clicks int) error {
	p := map[string]any{"type": typ, "x": x, "y": y}
	if typ != "mouseMoved" {
		p["button"] = "left"
		p["clickCount"] = clicks
	}
	return b.call(ctx, "Input.dispatchMouseEvent", p, nil)
}

// Click clicks the element's center with the mouse (count 2: a double
// click) and waits for the page load a navigation it started.
func (b *Browser) Click(ctx context.Context, e *Element, count int) error {
	x, y, err := b.center(ctx, e)
	if err != nil {
		return err
	}
	g := b.guardNavigation()
	if err := b.mouse(ctx, "mouseMoved", x, y, 0); err != nil {
		g.stop()
		return err
	}
	for c := 1; c <= count; c++ {
		if err := b.mouse(ctx, "mousePressed", x, y, c); err != nil {
			g.stop()
			return err
		}
		if err := b.mouse(ctx, "mouseReleased", x, y, c); err != nil {
			g.stop()
			return err
		}
	}
	return g.wait(ctx)
}

// Hover moves the mouse over the element.
func (b *Browser) Hover(ctx context.Context, e *Element) error {
	x, y, err := b.center(ctx, e)
	if err != nil {
		return err
	}
	return b.mouse(ctx, "mouseMoved", x, y, 0)
}

// Focus focuses the element.
func (b *Browser) Focus(ctx context.Context, e *Element) error {
	return b.callOn(ctx, e.objectID, "function(){this.scrollIntoView({block:'center',behavior:'instant'}); this.focus()}", nil, nil)
}

// Fill replaces the value of an input, textarea or editable element with
// text, as typed (input events fire).
func (b *Browser) Fill(ctx context.Context, e *Element, text string) error {
	var kind string
	err := b.callOn(ctx, e.objectID, `function(){
  this.scrollIntoView({block:'center', behavior:'instant'});
  const tag = this.tagName;
  if (tag === 'INPUT' || tag === 'TEXTAREA') {
    if (this.disabled) return 'disabled';
    if (this.readOnly) return 'readonly';
    this.focus();
    try { this.select(); } catch (e) { this.setSelectionRange && this.setSelectionRange(0, this.value.length); }
    return 'input';
  }
  if (this.isContentEditable) {
    this.focus();
    const r = document.createRange(); r.selectNodeContents(this);
    const s = getSelection(); s.removeAllRanges(); s.addRange(r);
    return 'editable';
  }
  if (tag === 'SELECT') return 'select';
  return 'other';
}`, nil, &kind)
	if err != nil {
		return err
	}
	switch kind {
	case "disabled", "readonly":
		return userErrorf("element %s is %s", e.sel, kind)
	case "select":
		return userErrorf("element %s is a <select>: use select", e.sel)
	case "other":
		return userErrorf("element %s cannot be filled (not an input, textarea or editable element)", e.sel)
	}
	if text == "" {
		return b.call(ctx, "Input.dispatchKeyEvent", keyEvent("rawKeyDown", keys["Delete"], 0), nil)
	}
	return b.call(ctx, "Input.insertText", map[string]any{"text": text}, nil)
}

// Type focuses the element and types text at the caret (no clearing).
func (b *Browser) Type(ctx context.Context, e *Element, text string) error {
	if err := b.Focus(ctx, e); err != nil {
		return err
	}
	return b.call(ctx, "Input.insertText", map[string]any{"text": text}, nil)
}

// key describes one key for Input.dispatchKeyEvent.
type key struct {
	key, code, text string
	keyCode         int
}

var keys = map[string]key{
	"Enter":      {"Enter", "Enter", "\r", 13},
	"Tab":        {"Tab", "Tab", "", 9},
	"Escape":     {"Escape", "Escape", "", 27},
	"Backspace":  {"Backspace", "Backspace", "", 8},
	"Delete":     {"Delete", "Delete", "", 46},
	"ArrowUp":    {"ArrowUp", "ArrowUp", "", 38},
	"ArrowDown":  {"ArrowDown", "ArrowDown", "", 40},
	"ArrowLeft":  {"ArrowLeft", "ArrowLeft", "", 37},
	"ArrowRight": {"ArrowRight", "ArrowRight", "", 39},
	"Home":       {"Home", "Home", "", 36},
	"End":        {"End", "End", "", 35},
	"PageUp":     {"PageUp", "PageUp", "", 33},
	"PageDown":   {"PageDown", "PageDown", "", 34},
	"Space":      {" ", "Space", " ", 32},
	"Insert":     {"Insert", "Insert", "", 45},
}

var keyAliases = map[string]string{
	"enter": "Enter", "return": "Enter", "tab": "Tab", "escape": "Escape", "esc": "Escape",
	"backspace": "Backspace", "delete": "Delete", "del": "Delete", "arrowup": "ArrowUp", "up": "ArrowUp",
	"arrowdown": "ArrowDown", "down": "ArrowDown", "arrowleft": "ArrowLeft", "left": "ArrowLeft",
	"arrowright": "ArrowRight", "right": "ArrowRight", "home": "Home", "end": "End",
	"pageup": "PageUp", "pagedown": "PageDown", "space": "Space", "insert": "Insert",
}

var modifierBits = map[string]int{"alt": 1, "control": 2, "ctrl": 2, "meta": 4, "cmd": 4, "command": 4, "shift": 8}

// ParseKey parses a key chord like "Enter", "a", "Control+a" or "Shift+Tab".
func ParseKey(s string) (key, int, error) {
	parts := strings.Split(s, "+")
	if len(parts) > 1 && parts[len(parts)-1] == "" { // "Control++"
		parts = append(parts[:len(parts)-2], "+")
	}
	mods := 0
	for _, m := range parts[:len(parts)-1] {
		bit, ok := modifierBits[strings.ToLower(m)]
		if !ok {
			return key{}, 0, userErrorf("unknown modifier %q in %q (Alt, Control, Meta, Shift)", m, s)
		}
		mods |= bit
	}
	name := parts[len(parts)-1]
	if k, ok := keys[name]; ok {
		return k, mods, nil
	}
	if n, ok := keyAliases[strings.ToLower(name)]; ok {
		return keys[n], mods, nil
	}
	if utf8.RuneCountInString(name) == 1 {
		r, _ := utf8.DecodeRuneInString(name)
		k := key{key: name, text: name}
		switch {
		case r >= 'a' && r <= 'z':
			k.code, k.keyCode = "Key"+strings.ToUpper(name), int(r-'a'+'A')
		case r >= 'A' && r <= 'Z':
			k.code, k.keyCode = "Key"+name, int(r)
		case r >= '0' && r <= '9':
			k.code, k.keyCode = "Digit"+name, int(r)
		}
		return k, mods, nil
	}
	if len(name) >= 2 && name[0] == 'F' {
		var n int
		if _, err := fmt.Sscanf(name, "F%d", &n); err == nil && n >= 1 && n <= 12 {
			return key{key: name, code: name, keyCode: 111 + n}, mods, nil
		}
	}
	return key{}, 0, userErrorf("unknown key %q", name)
}

func keyEvent(typ string, k key, mods int) map[string]any {
	p := map[string]any{"type": typ, "key": k.key, "code": k.code, "windowsVirtualKeyCode": k.keyCode, "modifiers": mods}
	// Text (and so keypress/input) only without Control/Alt/Meta.
	if typ == "keyDown" && k.text != "" && mods&^8 == 0 {
		p["text"] = k.text
	}
	return p
}

// Press presses a key chord on the focused element (or the element, when
// given) and waits for a navigation it started (Enter in a form).
func (b *Browser) Press(ctx context.Context, chord string, e *Element) error {
	k, mods, err := ParseKey(chord)
	if err != nil {
		return err
	}
	if e != nil {
		if err := b.Focus(ctx, e); err != nil {
			return err
		}
	}
	g := b.guardNavigation()
	down := "rawKeyDown"
	if k.text != "" && mods&^8 == 0 {
		down = "keyDown"
	}
	if err := b.call(ctx, "Input.dispatchKeyEvent", keyEvent(down, k, mods), nil); err != nil {
		g.stop()
		return err
	}
	if err := b.call(ctx, "Input.dispatchKeyEvent", keyEvent("keyUp", k, mods), nil); err != nil {
		g.stop()
		return err
	}
	return g.wait(ctx)
}

// SelectOptions selects the options of a <select> whose value or label is
// one of values and returns the selected values.
func (b *Browser) SelectOptions(ctx context.Context, e *Element, values []string) ([]string, error) {
	var res struct {
		Err      string   `json:"err"`
		Selected []string `json:"selected"`
	}
	err := b.callOn(ctx, e.objectID, `function(vals){
  if (this.tagName !== 'SELECT') return {err: 'not a <select>'};
  const picked = [];
  for (const o of this.options) {
    const hit = vals.includes(o.value) || vals.includes(o.label) || vals.includes(o.text.trim());
    if (hit && (this.multiple || picked.length === 0)) { o.selected = true; picked.push(o.value); }
    else if (this.multiple) o.selected = false;
  }
  if (!picked.length) return {err: 'no option matches'};
  this.dispatchEvent(new Event('input', {bubbles: true}));
  this.dispatchEvent(new Event('change', {bubbles: true}));
  return {selected: picked};
}`, []any{values}, &res)
	if err != nil {
		return nil, err
	}
	if res.Err != "" {
		return nil, userErrorf("select %s: %s", e.sel, res.Err)
	}
	return res.Selected, nil
}

// Checked reports the checked state of a checkbox, radio or ARIA checkable.
func (b *Browser) Checked(ctx context.Context, e *Element) (bool, error) {
	var v bool
	err := b.callOn(ctx, e.objectID, `function(){
  if ('checked' in this && (this.type === 'checkbox' || this.type === 'radio')) return this.checked;
  return this.getAttribute('aria-checked') === 'true';
}`, nil, &v)
	return v, err
}

// SetChecked clicks the element when its checked state differs from want.
func (b *Browser) SetChecked(ctx context.Context, e *Element, want bool) error {
	got, err := b.Checked(ctx, e)
	if err != nil || got == want {
		return err
	}
	if err := b.Click(ctx, e, 1); err != nil {
		return err
	}
	if got, err = b.Checked(ctx, e); err != nil {
		return err
	}
	if got != want {
		return userErrorf("clicking %s did not change its checked state", e.sel)
	}
	return nil
}

// Visible reports whether the element has a size and is not hidden by CSS.
func (b *Browser) Visible(ctx context.Context, e *Element) (bool, error) {
	var v bool
	err := b.callOn(ctx, e.objectID, visibleFn, nil, &v)
	return v, err
}

const visibleFn = `function(){
  const r = this.getBoundingClientRect();
  if (r.width <= 0 || r.height <= 0) return false;
  const s = getComputedStyle(this);
  return s.visibility !== 'hidden' && s.display !== 'none' && Number(s.opacity) !== 0;
}`

// Scroll scrolls the page by dx, dy CSS pixels.
func (b *Browser) Scroll(ctx context.Context, dx, dy int) error {
	_, err := b.evaluate(ctx, fmt.Sprintf("window.scrollBy(%d, %d)", dx, dy), false)
	return err
}

// Count counts the elements matching a CSS selector.
func (b *Browser) Count(ctx context.Context, sel string) (int, error) {
	v, err := b.evaluate(ctx, "document.querySelectorAll("+jsString(sel)+").length", false)
	if err != nil {
		var ue *UserError
		if errors.As(err, &ue) {
			return 0, userErrorf("invalid selector %q", sel)
		}
		return 0, err
	}
	var n int
	err = json.Unmarshal(v, &n)
	return n, err
}
