package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// SnapshotOptions are the flags of `snapshot`.
type SnapshotOptions struct {
	Interactive bool   // -i: only interactive elements, as a flat list
	Compact     bool   // -c: drop unnamed structural elements
	MaxDepth    int    // -d N: 0 = unlimited
	Selector    string // -s: the subtree of this element only
}

// AXNode is one node of Chromium's accessibility tree (the fields used).
type AXNode struct {
	NodeID           string       `json:"nodeId"`
	Ignored          bool         `json:"ignored"`
	Role             *axValue     `json:"role"`
	Name             *axValue     `json:"name"`
	Value            *axValue     `json:"value"`
	Properties       []axProperty `json:"properties"`
	ChildIDs         []string     `json:"childIds"`
	BackendDOMNodeID int64        `json:"backendDOMNodeId"`
}

type axValue struct {
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
}

func (v *axValue) String() string {
	if v == nil || len(v.Value) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(v.Value, &s) == nil {
		return s
	}
	return string(v.Value)
}

type axProperty struct {
	Name  string   `json:"name"`
	Value *axValue `json:"value"`
}

// interactiveRoles always get a ref.
var interactiveRoles = set("button", "link", "textbox", "searchbox", "checkbox", "radio", "combobox",
	"listbox", "option", "menuitem", "menuitemcheckbox", "menuitemradio", "slider", "spinbutton",
	"switch", "tab", "treeitem")

// contentRoles get a ref when they have a name.
var contentRoles = set("heading", "img", "image", "cell", "gridcell", "columnheader", "rowheader",
	"listitem", "article", "region", "navigation", "main", "banner", "contentinfo", "complementary",
	"form", "dialog", "alertdialog", "alert", "status", "figure", "table", "list", "row", "tabpanel",
	"menu", "menubar", "tablist", "tree", "grid", "treegrid", "group", "search", "paragraph", "blockquote")

// transparentRoles are never printed; their children take their place.
var transparentRoles = set("generic", "none", "presentation", "LineBreak", "InlineTextBox",
	"RootWebArea", "WebArea", "Iframe", "IframePresentational", "ListMarker", "Section", "sectionheader",
	"LabelText", "MenuListPopup", "Legend", "Abbr", "Ruby", "Canvas", "Pre", "Mark", "Details", "DescriptionListDetail")

func set(s ...string) map[string]bool {
	m := make(map[string]bool, len(s))
	for _, v := range s {
		m[v] = true
	}
	return m
}

// Snapshot returns the accessibility snapshot of the current page and
// remembers its refs for later selectors.
func (b *Browser) Snapshot(ctx context.Context, opts SnapshotOptions) (string, error) {
	var res struct {
		Nodes []AXNode `json:"nodes"`
	}
	if err := b.call(ctx, "Accessibility.getFullAXTree", nil, &res); err != nil {
		return "", err
	}
	var root int64
	if opts.Selector != "" {
		e, err := b.Resolve(ctx, opts.Selector)
		if err != nil {
			return "", err
		}
		var d struct {
			Node struct {
				BackendNodeID int64 `json:"backendNodeId"`
			} `json:"node"`
		}
		if err := b.call(ctx, "DOM.describeNode", map[string]any{"objectId": e.objectID}, &d); err != nil {
			return "", err
		}
		root = d.Node.BackendNodeID
	}
	text, refs, err := RenderSnapshot(res.Nodes, opts, root)
	if err != nil {
		return "", err
	}
	b.Tab().refs = refs
	return text, nil
}

// RenderSnapshot renders an accessibility tree as indented text lines
// `- role "name" [ref=eN] [attrs]: value`, numbering refs in document order.
// rootBackendID, when non-zero, limits it to that element's subtree.
func RenderSnapshot(nodes []AXNode, opts SnapshotOptions, rootBackendID int64) (string, map[string]int64, error) {
	byID := make(map[string]*AXNode, len(nodes))
	isChild := map[string]bool{}
	for i := range nodes {
		byID[nodes[i].NodeID] = &nodes[i]
		for _, c := range nodes[i].ChildIDs {
			isChild[c] = true
		}
	}
	var roots []*AXNode
	for i := range nodes {
		n := &nodes[i]
		if rootBackendID != 0 {
			if n.BackendDOMNodeID == rootBackendID {
				roots = []*AXNode{n}
				break
			}
		} else if !isChild[n.NodeID] {
			roots = append(roots, n)
		}
	}
	if rootBackendID != 0 && len(roots) == 0 {
		return "", nil, userErrorf("the element of -s %s is not in the accessibility tree", opts.Selector)
	}
	r := &renderer{byID: byID, opts: opts, refs: map[string]int64{}}
	for _, n := range roots {
		r.walk(n, 0, "", map[string]bool{})
	}
	out := r.sb.String()
	if out == "" {
		if opts.Interactive {
			out = "(no interactive elements)\n"
		} else {
			out = "(empty page)\n"
		}
	}
	return out, r.refs, nil
}

type renderer struct {
	byID map[string]*AXNode
	opts SnapshotOptions
	refs map[string]int64
	next int
	sb   strings.Builder
}

// walk prints n at depth (unless it is transparent) and then its children.
// parentName is the name of the nearest printed ancestor: text that repeats
// it is not printed again.
func (r *renderer) walk(n *AXNode, depth int, parentName string, seen map[string]bool) {
	if seen[n.NodeID] {
		return
	}
	seen[n.NodeID] = true
	role := n.Role.String()
	name := strings.TrimSpace(n.Name.String())
	childDepth, childParent := depth, parentName
	if !n.Ignored && !transparentRoles[role] && r.printable(role, name, parentName) {
		if r.opts.MaxDepth == 0 || depth < r.opts.MaxDepth {
			r.line(n, role, name, depth)
		}
		if !r.opts.Interactive {
			childDepth = depth + 1
		}
		if name != "" {
			childParent = name
		}
	}
	if r.opts.MaxDepth > 0 && childDepth >= r.opts.MaxDepth && !r.opts.Interactive {
		return
	}
	for _, id := range n.ChildIDs {
		if c, ok := r.byID[id]; ok {
			r.walk(c, childDepth, childParent, seen)
		}
	}
}

func (r *renderer) printable(role, name, parentName string) bool {
	if r.opts.Interactive {
		return interactiveRoles[role]
	}
	if role == "StaticText" {
		return name != "" && !strings.Contains(parentName, name)
	}
	if r.opts.Compact && name == "" && !interactiveRoles[role] {
		return false
	}
	return true
}

func (r *renderer) line(n *AXNode, role, name string, depth int) {
	sb := &r.sb
	sb.WriteString(strings.Repeat("  ", depth))
	if role == "StaticText" {
		sb.WriteString("- text: ")
		sb.WriteString(oneLine(name))
		sb.WriteByte('\n')
		return
	}
	sb.WriteString("- ")
	sb.WriteString(role)
	if name != "" {
		sb.WriteString(" ")
		sb.WriteString(strconv.Quote(oneLine(name)))
	}
	if n.BackendDOMNodeID != 0 && (interactiveRoles[role] || contentRoles[role] && name != "") {
		r.next++
		ref := "e" + strconv.Itoa(r.next)
		r.refs[ref] = n.BackendDOMNodeID
		sb.WriteString(" [ref=" + ref + "]")
	}
	for _, p := range n.Properties {
		v := p.Value.String()
		switch p.Name {
		case "level":
			sb.WriteString(" [level=" + v + "]")
		case "checked", "pressed":
			if v == "true" {
				sb.WriteString(" [" + p.Name + "]")
			} else if v == "mixed" {
				sb.WriteString(" [" + p.Name + "=mixed]")
			}
		case "disabled", "selected", "required", "readonly":
			if v == "true" {
				sb.WriteString(" [" + p.Name + "]")
			}
		case "expanded":
			sb.WriteString(" [expanded=" + v + "]")
		}
	}
	if v := oneLine(n.Value.String()); v != "" && v != name {
		fmt.Fprintf(sb, ": %s", v)
	}
	sb.WriteByte('\n')
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "..."
	}
	return s
}
