package browser

import (
	"encoding/json"
	"strings"
	"testing"
)

func ax(id, role, name string, backend int64, children ...string) AXNode {
	n := AXNode{NodeID: id, BackendDOMNodeID: backend, ChildIDs: children}
	n.Role = &axValue{Type: "role", Value: json.RawMessage(`"` + role + `"`)}
	if name != "" {
		b, _ := json.Marshal(name)
		n.Name = &axValue{Type: "computedString", Value: b}
	}
	return n
}

func prop(n AXNode, name, value string) AXNode {
	n.Properties = append(n.Properties, axProperty{Name: name, Value: &axValue{Value: json.RawMessage(value)}})
	return n
}

// page is a small tree: a heading, a form with a textbox and a button, a
// link, an unnamed list and a paragraph, under generic wrappers and an
// ignored node.
func page() []AXNode {
	ignored := ax("9", "none", "", 90, "10")
	ignored.Ignored = true
	tb := ax("5", "textbox", "Email", 50)
	tb.Value = &axValue{Type: "string", Value: json.RawMessage(`"a@b.c"`)}
	return []AXNode{
		ax("1", "RootWebArea", "Test page", 1, "2", "3", "7", "9", "12"),
		prop(ax("2", "heading", "Welcome", 20, "2t"), "level", "1"),
		ax("2t", "StaticText", "Welcome", 21),
		ax("3", "form", "", 30, "4"),
		ax("4", "generic", "", 40, "5", "6"),
		tb,
		prop(ax("6", "button", "Send", 60, "6t"), "disabled", "true"),
		ax("6t", "StaticText", "Send", 61),
		ax("7", "link", "More", 70),
		ignored,
		ax("10", "list", "", 100, "11"),
		ax("11", "listitem", "", 110, "11t"),
		ax("11t", "StaticText", "first item", 111),
		ax("12", "paragraph", "", 120, "12t"),
		ax("12t", "StaticText", "Hello   world\n again", 121),
	}
}

func TestRenderSnapshotFull(t *testing.T) {
	out, refs, err := RenderSnapshot(page(), SnapshotOptions{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := `- heading "Welcome" [ref=e1] [level=1]
- form
  - textbox "Email" [ref=e2]: a@b.c
  - button "Send" [ref=e3] [disabled]
- link "More" [ref=e4]
- list
  - listitem
    - text: first item
- paragraph
  - text: Hello world again
`
	if out != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}
	wantRefs := map[string]int64{"e1": 20, "e2": 50, "e3": 60, "e4": 70}
	if len(refs) != len(wantRefs) {
		t.Errorf("refs = %v", refs)
	}
	for k, v := range wantRefs {
		if refs[k] != v {
			t.Errorf("ref %s = %d, want %d", k, refs[k], v)
		}
	}
}

func TestRenderSnapshotInteractive(t *testing.T) {
	out, refs, err := RenderSnapshot(page(), SnapshotOptions{Interactive: true}, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := "- textbox \"Email\" [ref=e1]: a@b.c\n- button \"Send\" [ref=e2] [disabled]\n- link \"More\" [ref=e3]\n"
	if out != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}
	if refs["e1"] != 50 || refs["e3"] != 70 || len(refs) != 3 {
		t.Errorf("refs = %v", refs)
	}
	empty, _, _ := RenderSnapshot([]AXNode{ax("1", "RootWebArea", "", 1)}, SnapshotOptions{Interactive: true}, 0)
	if empty != "(no interactive elements)\n" {
		t.Errorf("empty page -i = %q", empty)
	}
}

func TestRenderSnapshotDepthCompactScope(t *testing.T) {
	out, _, _ := RenderSnapshot(page(), SnapshotOptions{MaxDepth: 1}, 0)
	if strings.Contains(out, "  -") || !strings.Contains(out, "- form\n") {
		t.Errorf("-d 1:\n%s", out)
	}
	out, _, _ = RenderSnapshot(page(), SnapshotOptions{Compact: true}, 0)
	if strings.Contains(out, "- form") || strings.Contains(out, "- list\n") || !strings.Contains(out, "- textbox \"Email\"") {
		t.Errorf("-c:\n%s", out)
	}
	out, refs, err := RenderSnapshot(page(), SnapshotOptions{Selector: "form"}, 30)
	if err != nil {
		t.Fatal(err)
	}
	if out != "- form\n  - textbox \"Email\" [ref=e1]: a@b.c\n  - button \"Send\" [ref=e2] [disabled]\n" || len(refs) != 2 {
		t.Errorf("-s form:\n%s %v", out, refs)
	}
	if _, _, err := RenderSnapshot(page(), SnapshotOptions{Selector: "x"}, 999); err == nil {
		t.Error("a scope outside the tree did not fail")
	}
}

func TestRefOf(t *testing.T) {
	for in, want := range map[string]string{"@e1": "e1", "@e42": "e42", "ref=e7": "e7"} {
		if got, ok := RefOf(in); !ok || got != want {
			t.Errorf("RefOf(%q) = %q, %v", in, got, ok)
		}
	}
	for _, in := range []string{"e1", "@e", "@x1", "@e1a", "#e1", "@"} {
		if _, ok := RefOf(in); ok {
			t.Errorf("RefOf(%q) accepted", in)
		}
	}
}

func TestParseKey(t *testing.T) {
	k, m, err := ParseKey("Control+a")
	if err != nil || k.key != "a" || k.code != "KeyA" || k.keyCode != 65 || m != 2 {
		t.Errorf("Control+a = %+v %d %v", k, m, err)
	}
	k, m, err = ParseKey("Shift+Tab")
	if err != nil || k.key != "Tab" || m != 8 {
		t.Errorf("Shift+Tab = %+v %d %v", k, m, err)
	}
	k, _, err = ParseKey("enter")
	if err != nil || k.key != "Enter" || k.text != "\r" {
		t.Errorf("enter = %+v %v", k, err)
	}
	if k, _, err = ParseKey("F5"); err != nil || k.keyCode != 116 {
		t.Errorf("F5 = %+v %v", k, err)
	}
	if k, m, err = ParseKey("Control++"); err != nil || k.key != "+" || m != 2 {
		t.Errorf("Control++ = %+v %d %v", k, m, err)
	}
	for _, bad := range []string{"Hyper+a", "NoSuchKey", "F13"} {
		if _, _, err := ParseKey(bad); err == nil {
			t.Errorf("ParseKey(%q) accepted", bad)
		}
	}
	// No text (so no character input) with Control held.
	if ev := keyEvent("keyDown", keys["Enter"], 2); ev["text"] != nil {
		t.Errorf("Control+Enter carries text: %v", ev)
	}
}

func TestNormalizeURL(t *testing.T) {
	for in, want := range map[string]string{
		"example.com": "https://example.com", "http://x": "http://x", "about:blank": "about:blank",
		"localhost:8080/a": "http://localhost:8080/a", "127.0.0.1:9/x": "http://127.0.0.1:9/x", "data:text/html,hi": "data:text/html,hi",
	} {
		if got := NormalizeURL(in); got != want {
			t.Errorf("NormalizeURL(%q) = %q, want %q", in, got, want)
		}
	}
}
