// A small xterm-compatible terminal: it interprets the control sequences bash, readline and
// full-screen programs (less, top, vim) send (cursor movement, erase, insert and delete,
// scroll regions, the alternate screen, SGR colours in 16, 256 and true colour) and renders
// the screen as DOM rows, with a scrollback above. Input comes from a hidden textarea (IME and
// paste work) and from special keys. TERM in the sandbox is xterm-256color.

const MAX_SCROLLBACK = 1000;

function attr(o) {
  return Object.freeze(Object.assign({ fg: -1, bg: -1, bold: false, dim: false, italic: false, underline: false, inverse: false }, o));
}
const DEFAULT = attr({});

function blankRow(cols, a) { const r = new Array(cols); for (let i = 0; i < cols; i++) r[i] = [' ', a || DEFAULT]; return r; }

function color256(n) {
  if (n < 16) return null; // a palette class
  if (n < 232) {
    n -= 16;
    const v = [0, 95, 135, 175, 215, 255];
    return 'rgb(' + v[Math.floor(n / 36)] + ',' + v[Math.floor(n / 6) % 6] + ',' + v[n % 6] + ')';
  }
  const g = 8 + (n - 232) * 10;
  return 'rgb(' + g + ',' + g + ',' + g + ')';
}

export class Terminal {
  // el is the element the terminal fills; onData receives what the user types, onResize the
  // new size in cells.
  constructor(el, { onData, onResize, label }) {
    this.el = el;
    this.onData = onData;
    this.onResize = onResize;
    el.classList.add('term');
    this.view = document.createElement('div');
    this.view.className = 'term-view';
    this.back = document.createElement('div');
    this.back.className = 'term-back';
    this.screenEl = document.createElement('div');
    this.screenEl.className = 'term-screen';
    this.view.append(this.back, this.screenEl);
    this.input = document.createElement('textarea');
    this.input.className = 'term-input';
    this.input.setAttribute('aria-label', label || 'Terminal input');
    this.input.setAttribute('autocapitalize', 'off');
    this.input.setAttribute('autocomplete', 'off');
    this.input.spellcheck = false;
    this.measure = document.createElement('span');
    this.measure.className = 'term-measure';
    this.measure.textContent = 'MMMMMMMMMM';
    el.append(this.view, this.input, this.measure);
    this.decoder = new TextDecoder('utf-8');
    this.cols = 80; this.rows = 24;
    this.reset();
    this.bind();
    this.fit();
    // The element follows the window, and layout changes of its own (a sidebar, fonts).
    this.onWindowResize = () => this.fit();
    window.addEventListener('resize', this.onWindowResize);
    this.ro = new ResizeObserver(() => this.fit());
    this.ro.observe(el);
  }

  reset() {
    this.main = []; for (let i = 0; i < this.rows; i++) this.main.push(blankRow(this.cols));
    this.alt = null;
    this.lines = this.main;
    this.x = 0; this.y = 0; this.a = DEFAULT;
    this.top = 0; this.bottom = this.rows - 1;
    this.saved = { x: 0, y: 0, a: DEFAULT };
    this.state = 0; this.params = ''; this.osc = '';
    this.wrapPending = false;
    this.modes = { cursor: true, appCursor: false, paste: false, wrap: true };
    this.dirty = true;
  }

  dispose() { this.ro.disconnect(); window.removeEventListener('resize', this.onWindowResize); }
  focus() { this.input.focus({ preventScroll: true }); }

  // text returns the visible screen and the scrollback as plain text (for copying and tests).
  text() {
    const back = Array.from(this.back.children, (d) => d.textContent.replace(/\s+$/, ''));
    return back.concat(this.lines.map((r) => r.map((c) => c[0]).join('').replace(/\s+$/, ''))).join('\n');
  }

  bind() {
    this.el.addEventListener('mousedown', (e) => { if (e.button === 0 && !window.getSelection().toString()) setTimeout(() => this.focus(), 0); });
    this.el.addEventListener('click', () => { if (!window.getSelection().toString()) this.focus(); });
    this.input.addEventListener('input', (e) => {
      if (e.isComposing) return;
      const v = this.input.value;
      this.input.value = '';
      if (v) this.onData(v.replace(/\n/g, '\r'));
    });
    this.input.addEventListener('compositionend', () => {
      const v = this.input.value; this.input.value = '';
      if (v) this.onData(v);
    });
    this.input.addEventListener('paste', (e) => {
      e.preventDefault();
      const t = (e.clipboardData.getData('text/plain') || '').replace(/\r?\n/g, '\r');
      this.onData(this.modes.paste ? '\x1b[200~' + t + '\x1b[201~' : t);
    });
    this.input.addEventListener('keydown', (e) => { const s = this.keySequence(e); if (s !== null) { e.preventDefault(); this.onData(s); } });
  }

  keySequence(e) {
    if (e.isComposing || e.metaKey) return null;
    const app = this.modes.appCursor;
    const mod = (e.shiftKey ? 1 : 0) + (e.altKey ? 2 : 0) + (e.ctrlKey ? 4 : 0);
    const csi = (final, tilde) => mod ? '\x1b[' + (tilde ? tilde + ';' + (mod + 1) + '~' : '1;' + (mod + 1) + final) : (tilde ? '\x1b[' + tilde + '~' : (app ? '\x1bO' : '\x1b[') + final);
    switch (e.key) {
      case 'Enter': return '\r';
      case 'Backspace': return e.ctrlKey ? '\x08' : '\x7f';
      case 'Tab': return e.shiftKey ? '\x1b[Z' : '\t';
      case 'Escape': return '\x1b';
      case 'ArrowUp': return csi('A');
      case 'ArrowDown': return csi('B');
      case 'ArrowRight': return csi('C');
      case 'ArrowLeft': return csi('D');
      case 'Home': return csi('H');
      case 'End': return csi('F');
      case 'Insert': return csi('', 2);
      case 'Delete': return csi('', 3);
      case 'PageUp': return csi('', 5);
      case 'PageDown': return csi('', 6);
    }
    if (/^F([1-9]|1[0-2])$/.test(e.key)) {
      const n = Number(e.key.slice(1));
      if (n <= 4) return '\x1bO' + 'PQRS'[n - 1];
      return '\x1b[' + [15, 17, 18, 19, 20, 21, 23, 24][n - 5] + '~';
    }
    if (e.key.length === 1 && e.ctrlKey && !e.altKey) {
      const c = e.key.toUpperCase().charCodeAt(0);
      if (c >= 64 && c <= 95) return String.fromCharCode(c - 64);
      if (e.key === ' ' || e.key === '2') return '\x00';
      return null;
    }
    if (e.key.length === 1 && e.altKey && !e.ctrlKey) return '\x1b' + e.key;
    return null; // printable text arrives through the input event
  }

  // fit sizes the terminal to its element and reports a changed size.
  fit() {
    const r = this.measure.getBoundingClientRect();
    const cw = r.width / 10, ch = r.height;
    if (!cw || !ch) return;
    const box = this.el.getBoundingClientRect();
    const cols = Math.max(20, Math.min(500, Math.floor((box.width - 12) / cw)));
    const rows = Math.max(5, Math.min(300, Math.floor((box.height - 8) / ch)));
    if (cols === this.cols && rows === this.rows) return;
    this.resize(cols, rows);
    this.onResize(cols, rows);
  }

  resize(cols, rows) {
    // Rows go from the bottom while they are blank and below the cursor (as xterm does), else
    // from the top, into the scrollback; y follows the rows removed above it.
    const adjust = (lines, main) => {
      let removedAbove = 0;
      for (const r of lines) {
        if (r.length > cols) r.length = cols;
        while (r.length < cols) r.push([' ', DEFAULT]);
      }
      while (lines.length > rows) {
        const last = lines[lines.length - 1];
        if (lines.length - 1 > this.y - removedAbove && last.every((c) => c[0] === ' ')) { lines.pop(); continue; }
        const gone = lines.shift();
        removedAbove++;
        if (main) this.scrollOut(gone);
      }
      while (lines.length < rows) lines.push(blankRow(cols));
      return removedAbove;
    };
    this.cols = cols; this.rows = rows;
    const removed = adjust(this.lines, this.lines === this.main);
    if (this.alt) adjust(this.lines === this.alt ? this.main : this.alt, this.lines === this.alt);
    this.y = Math.max(0, Math.min(rows - 1, this.y - removed));
    this.x = Math.min(this.x, cols - 1);
    this.top = 0; this.bottom = rows - 1;
    this.dirty = true; this.schedule();
  }

  write(data) {
    const s = typeof data === 'string' ? data : this.decoder.decode(data, { stream: true });
    for (const ch of s) this.feed(ch);
    this.dirty = true;
    this.schedule();
  }

  schedule() {
    if (this.raf) return;
    this.raf = requestAnimationFrame(() => { this.raf = 0; this.render(); });
  }

  feed(ch) {
    const c = ch.codePointAt(0);
    switch (this.state) {
      case 1: this.escape(ch); return;
      case 2:
        if (c >= 0x40 && c <= 0x7e) { this.state = 0; this.csi(ch); } else if (this.params.length < 64) this.params += ch;
        return;
      case 3:
        if (c === 7) { this.state = 0; return; }
        if (c === 0x1b) { this.state = 4; return; }
        if (this.osc.length < 512) this.osc += ch;
        return;
      case 4: this.state = ch === '\\' ? 0 : 3; return;
      case 5: this.state = 0; return; // charset designation: one more byte
    }
    if (c < 0x20 || c === 0x7f) { this.control(c); return; }
    this.print(ch);
  }

  control(c) {
    switch (c) {
      case 0x1b: this.state = 1; return;
      case 0x0d: this.x = 0; this.wrapPending = false; return;
      case 0x0a: case 0x0b: case 0x0c: this.lineFeed(); return;
      case 0x08: if (this.x > 0) this.x--; this.wrapPending = false; return;
      case 0x09: this.x = Math.min(this.cols - 1, (Math.floor(this.x / 8) + 1) * 8); return;
      case 0x07: return;
    }
  }

  print(ch) {
    if (this.wrapPending) { this.x = 0; this.lineFeed(); this.wrapPending = false; }
    this.lines[this.y][this.x] = [ch, this.a];
    if (this.x === this.cols - 1) { if (this.modes.wrap) this.wrapPending = true; } else this.x++;
  }

  lineFeed() {
    if (this.y === this.bottom) this.scrollUp(1);
    else if (this.y < this.rows - 1) this.y++;
  }

  scrollUp(n) {
    for (let i = 0; i < n; i++) {
      const gone = this.lines.splice(this.top, 1)[0];
      this.lines.splice(this.bottom, 0, blankRow(this.cols, this.blankAttr()));
      if (this.lines === this.main && this.top === 0) this.scrollOut(gone);
    }
  }

  scrollDown(n) {
    for (let i = 0; i < n; i++) {
      this.lines.splice(this.bottom, 1);
      this.lines.splice(this.top, 0, blankRow(this.cols, this.blankAttr()));
    }
  }

  scrollOut(row) {
    this.back.append(this.rowElement(row, -1));
    while (this.back.childElementCount > MAX_SCROLLBACK) this.back.firstChild.remove();
  }

  blankAttr() { return this.a.bg === -1 ? DEFAULT : attr({ bg: this.a.bg }); }

  escape(ch) {
    this.state = 0;
    switch (ch) {
      case '[': this.state = 2; this.params = ''; return;
      case ']': this.state = 3; this.osc = ''; return;
      case '(': case ')': case '*': case '+': this.state = 5; return;
      case '7': this.saved = { x: this.x, y: this.y, a: this.a }; return;
      case '8': ({ x: this.x, y: this.y, a: this.a } = this.saved); return;
      case 'D': this.lineFeed(); return;
      case 'E': this.x = 0; this.lineFeed(); return;
      case 'M': if (this.y === this.top) this.scrollDown(1); else if (this.y > 0) this.y--; return;
      case 'c': this.reset(); this.back.replaceChildren(); return;
    }
  }

  csi(final) {
    let p = this.params, priv = '';
    if (p && '?>=<'.includes(p[0])) { priv = p[0]; p = p.slice(1); }
    const args = p.split(';').map((v) => parseInt(v, 10));
    const n = (i, d) => (isNaN(args[i]) || args[i] === 0 ? d : args[i]);
    const clampY = (y) => Math.max(0, Math.min(this.rows - 1, y));
    const clampX = (x) => Math.max(0, Math.min(this.cols - 1, x));
    this.wrapPending = false;
    const row = this.lines[this.y];
    switch (final) {
      case 'A': this.y = Math.max(this.y >= this.top ? this.top : 0, this.y - n(0, 1)); return;
      case 'B': this.y = Math.min(this.y <= this.bottom ? this.bottom : this.rows - 1, this.y + n(0, 1)); return;
      case 'C': case 'a': this.x = clampX(this.x + n(0, 1)); return;
      case 'D': this.x = clampX(this.x - n(0, 1)); return;
      case 'E': this.x = 0; this.y = clampY(this.y + n(0, 1)); return;
      case 'F': this.x = 0; this.y = clampY(this.y - n(0, 1)); return;
      case 'G': case '`': this.x = clampX(n(0, 1) - 1); return;
      case 'd': this.y = clampY(n(0, 1) - 1); return;
      case 'H': case 'f': this.y = clampY(n(0, 1) - 1); this.x = clampX(n(1, 1) - 1); return;
      case 'J': this.eraseDisplay(isNaN(args[0]) ? 0 : args[0]); return;
      case 'K': this.eraseLine(isNaN(args[0]) ? 0 : args[0]); return;
      case '@': for (let i = 0; i < n(0, 1); i++) { row.splice(this.x, 0, [' ', this.blankAttr()]); row.length = this.cols; } return;
      case 'P': for (let i = 0; i < n(0, 1); i++) { row.splice(this.x, 1); row.push([' ', this.blankAttr()]); } return;
      case 'X': for (let i = 0; i < n(0, 1) && this.x + i < this.cols; i++) row[this.x + i] = [' ', this.blankAttr()]; return;
      case 'L': if (this.y >= this.top && this.y <= this.bottom) { const t = this.top; this.top = this.y; this.scrollDown(n(0, 1)); this.top = t; } return;
      case 'M': if (this.y >= this.top && this.y <= this.bottom) { const t = this.top; this.top = this.y; this.scrollUp(n(0, 1)); this.top = t; } return;
      case 'S': this.scrollUp(n(0, 1)); return;
      case 'T': if (!priv) this.scrollDown(n(0, 1)); return;
      case 'r': {
        const t = n(0, 1) - 1, b = n(1, this.rows) - 1;
        if (t < b && b < this.rows) { this.top = t; this.bottom = b; this.x = 0; this.y = 0; }
        return;
      }
      case 's': this.saved = { x: this.x, y: this.y, a: this.a }; return;
      case 'u': ({ x: this.x, y: this.y, a: this.a } = this.saved); return;
      case 'm': if (!priv) this.sgr(args); return;
      case 'h': case 'l': this.mode(priv, args, final === 'h'); return;
      case 'n': if (args[0] === 6) this.onData('\x1b[' + (this.y + 1) + ';' + (this.x + 1) + 'R'); else if (args[0] === 5) this.onData('\x1b[0n'); return;
      case 'c': if (!priv) this.onData('\x1b[?62;22c'); else if (priv === '>') this.onData('\x1b[>0;10;0c'); return;
    }
  }

  eraseDisplay(m) {
    const b = this.blankAttr();
    if (m === 0) { this.eraseLine(0); for (let y = this.y + 1; y < this.rows; y++) this.lines[y] = blankRow(this.cols, b); }
    else if (m === 1) { this.eraseLine(1); for (let y = 0; y < this.y; y++) this.lines[y] = blankRow(this.cols, b); }
    else if (m === 2 || m === 3) { for (let y = 0; y < this.rows; y++) this.lines[y] = blankRow(this.cols, b); if (m === 3) this.back.replaceChildren(); }
  }

  eraseLine(m) {
    const r = this.lines[this.y], b = this.blankAttr();
    const [from, to] = m === 0 ? [this.x, this.cols] : m === 1 ? [0, this.x + 1] : [0, this.cols];
    for (let x = from; x < to; x++) r[x] = [' ', b];
  }

  mode(priv, args, on) {
    if (priv !== '?') return;
    for (const m of args) {
      switch (m) {
        case 1: this.modes.appCursor = on; break;
        case 7: this.modes.wrap = on; break;
        case 25: this.modes.cursor = on; break;
        case 2004: this.modes.paste = on; break;
        case 47: case 1047: case 1049:
          if (on && !this.alt) {
            if (m === 1049) this.saved = { x: this.x, y: this.y, a: this.a };
            this.alt = []; for (let i = 0; i < this.rows; i++) this.alt.push(blankRow(this.cols));
            this.lines = this.alt;
          } else if (!on && this.alt) {
            this.alt = null; this.lines = this.main;
            if (m === 1049) ({ x: this.x, y: this.y, a: this.a } = this.saved);
          }
          this.top = 0; this.bottom = this.rows - 1;
          break;
      }
    }
  }

  sgr(args) {
    const a = Object.assign({}, this.a);
    if (!args.length) args = [0];
    for (let i = 0; i < args.length; i++) {
      const v = isNaN(args[i]) ? 0 : args[i];
      if (v === 0) Object.assign(a, DEFAULT);
      else if (v === 1) a.bold = true;
      else if (v === 2) a.dim = true;
      else if (v === 3) a.italic = true;
      else if (v === 4) a.underline = true;
      else if (v === 7) a.inverse = true;
      else if (v === 22) { a.bold = false; a.dim = false; }
      else if (v === 23) a.italic = false;
      else if (v === 24) a.underline = false;
      else if (v === 27) a.inverse = false;
      else if (v >= 30 && v <= 37) a.fg = v - 30;
      else if (v === 39) a.fg = -1;
      else if (v >= 40 && v <= 47) a.bg = v - 40;
      else if (v === 49) a.bg = -1;
      else if (v >= 90 && v <= 97) a.fg = v - 90 + 8;
      else if (v >= 100 && v <= 107) a.bg = v - 100 + 8;
      else if (v === 38 || v === 48) {
        const key = v === 38 ? 'fg' : 'bg';
        if (args[i + 1] === 5) { a[key] = args[i + 2] | 0; i += 2; }
        else if (args[i + 1] === 2) { a[key] = 'rgb(' + (args[i + 2] | 0) + ',' + (args[i + 3] | 0) + ',' + (args[i + 4] | 0) + ')'; i += 4; }
      }
    }
    this.a = attr(a);
  }

  // rowElement renders one row; cursorX is the cursor's column on it (-1: none).
  rowElement(row, cursorX) {
    const div = document.createElement('div');
    div.className = 'term-row';
    let run = '', ra = null, rc = false;
    const flush = () => {
      if (!run) return;
      if (ra === DEFAULT && !rc) div.append(run);
      else div.append(this.span(run, ra, rc));
      run = '';
    };
    for (let x = 0; x < row.length; x++) {
      const [ch, a] = row[x];
      const cur = x === cursorX;
      if (a !== ra || cur || rc) { flush(); ra = a; rc = cur; }
      run += ch;
    }
    flush();
    return div;
  }

  span(text, a, cursor) {
    const s = document.createElement('span');
    s.textContent = text;
    let fg = a.fg, bg = a.bg;
    if (a.inverse) { [fg, bg] = [bg === -1 ? 'dfg' : bg, fg === -1 ? 'dbg' : fg]; }
    const cls = [];
    const paint = (v, kind) => {
      if (v === -1) return;
      if (v === 'dfg' || v === 'dbg') { cls.push(kind + '-' + v); return; }
      if (typeof v === 'number' && v < 16) { cls.push(kind + '-' + v); return; }
      const css = typeof v === 'number' ? color256(v) : v;
      if (kind === 'fg') s.style.color = css; else s.style.backgroundColor = css;
    };
    paint(fg, 'fg'); paint(bg, 'bg');
    if (a.bold) cls.push('b');
    if (a.dim) cls.push('dim');
    if (a.italic) cls.push('i');
    if (a.underline) cls.push('u');
    if (cursor) cls.push('cursor');
    s.className = cls.join(' ');
    return s;
  }

  render() {
    if (!this.dirty) return;
    this.dirty = false;
    const stick = this.view.scrollTop + this.view.clientHeight >= this.view.scrollHeight - 4;
    const showCursor = this.modes.cursor ? this.x : -1;
    const rows = this.lines.map((r, y) => this.rowElement(r, y === this.y ? showCursor : -1));
    this.screenEl.replaceChildren(...rows);
    this.back.hidden = !!this.alt;
    if (stick) this.view.scrollTop = this.view.scrollHeight;
  }
}
