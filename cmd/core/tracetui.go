package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/wire"
)

// maxTraces bounds the traces the browser keeps; older ones scroll away.
const maxTraces = 200

type spanMsg wire.SpanRecord
type droppedMsg uint64
type endedMsg struct{ err error }

// runBrowser shows the spans arriving on msgs until the user quits or
// the stream ends (its error, on ended, is returned).
func runBrowser(ctx context.Context, out io.Writer, sidecar string, msgs <-chan tea.Msg, ended <-chan error) error {
	m := newBrowser(sidecar, lipgloss.NewRenderer(out))
	p := tea.NewProgram(m, tea.WithOutput(out), tea.WithAltScreen(), tea.WithContext(ctx))
	go func() {
		for {
			select {
			case m := <-msgs:
				p.Send(m)
			case err := <-ended:
				// Spans already read come first.
				for len(msgs) > 0 {
					p.Send(<-msgs)
				}
				p.Send(endedMsg{err})
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	final, err := p.Run()
	if err != nil && ctx.Err() != nil {
		return nil // Ctrl-C or SIGTERM
	}
	if err != nil {
		return err
	}
	if b, ok := final.(*browser); ok && b.endErr != nil {
		return b.endErr
	}
	return nil
}

// traceView is one trace in the browser.
type traceView struct {
	id    string
	spans map[string]*wire.SpanRecord
	// collapsed marks spans whose children are hidden; detailed marks
	// spans whose outcome lines are shown.
	collapsed map[string]bool
	detailed  map[string]bool
}

// row is one selectable line: a trace's span.
type row struct {
	trace *traceView
	span  *wire.SpanRecord
	depth int
}

type browser struct {
	sidecar string
	traces  []*traceView
	byID    map[string]*traceView
	rows    []row
	cursor  int
	follow  bool // the cursor stays on the newest row
	width   int
	height  int
	inspect *row // the variable inspector's span, nil when closed
	scroll  int  // inspector scroll offset
	dropped uint64
	endErr  error
	ended   bool

	st styles
}

type styles struct {
	title, faint, sel, allow, deny, err, key, dur lipgloss.Style
}

func newBrowser(sidecar string, r *lipgloss.Renderer) *browser {
	return &browser{
		sidecar: sidecar, byID: map[string]*traceView{}, follow: true, width: 100, height: 30,
		st: styles{
			title: r.NewStyle().Bold(true),
			faint: r.NewStyle().Faint(true),
			sel:   r.NewStyle().Reverse(true),
			allow: r.NewStyle().Foreground(lipgloss.Color("2")).Bold(true),
			deny:  r.NewStyle().Foreground(lipgloss.Color("1")).Bold(true),
			err:   r.NewStyle().Foreground(lipgloss.Color("5")).Bold(true),
			key:   r.NewStyle().Foreground(lipgloss.Color("6")),
			dur:   r.NewStyle().Foreground(lipgloss.Color("3")),
		},
	}
}

func (b *browser) Init() tea.Cmd { return nil }

func (b *browser) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		b.width, b.height = msg.Width, msg.Height
	case spanMsg:
		b.add(wire.SpanRecord(msg))
	case droppedMsg:
		b.dropped += uint64(msg)
	case endedMsg:
		b.endErr, b.ended = msg.err, true
		if msg.err != nil {
			return b, tea.Quit
		}
	case tea.KeyMsg:
		return b.key(msg)
	}
	return b, nil
}

func (b *browser) key(k tea.KeyMsg) (tea.Model, tea.Cmd) {
	switch k.String() {
	case "q", "ctrl+c":
		return b, tea.Quit
	}
	if b.inspect != nil {
		switch k.String() {
		case "esc", "v", "backspace":
			b.inspect = nil
		case "down", "j":
			b.scroll++
		case "up", "k":
			b.scroll = max(b.scroll-1, 0)
		}
		return b, nil
	}
	switch k.String() {
	case "up", "k":
		if b.cursor > 0 {
			b.cursor--
		}
		b.follow = false
	case "down", "j":
		if b.cursor < len(b.rows)-1 {
			b.cursor++
		}
		b.follow = b.cursor == len(b.rows)-1
	case "home", "g":
		b.cursor, b.follow = 0, false
	case "end", "G":
		b.cursor, b.follow = max(len(b.rows)-1, 0), true
	case "enter", " ":
		if r := b.selected(); r != nil {
			b.toggle(r)
		}
	case "v":
		if r := b.selected(); r != nil {
			rc := *r
			b.inspect, b.scroll = &rc, 0
		}
	}
	return b, nil
}

func (b *browser) selected() *row {
	if b.cursor < 0 || b.cursor >= len(b.rows) {
		return nil
	}
	return &b.rows[b.cursor]
}

// toggle expands or collapses a span: a span with children shows or
// hides them; every span shows or hides its outcome lines.
func (b *browser) toggle(r *row) {
	id := r.span.SpanID
	t := r.trace
	if len(b.children(t, id)) > 0 {
		t.collapsed[id] = !t.collapsed[id]
		t.detailed[id] = !t.collapsed[id] && hasOutcome(r.span)
	} else {
		t.detailed[id] = !t.detailed[id]
	}
	b.layout()
}

func (b *browser) add(sp wire.SpanRecord) {
	t := b.byID[sp.TraceID]
	if t == nil {
		t = &traceView{id: sp.TraceID, spans: map[string]*wire.SpanRecord{},
			collapsed: map[string]bool{}, detailed: map[string]bool{}}
		b.byID[sp.TraceID] = t
		b.traces = append(b.traces, t)
		if len(b.traces) > maxTraces {
			delete(b.byID, b.traces[0].id)
			b.traces = b.traces[1:]
		}
	}
	t.spans[sp.SpanID] = &sp
	b.layout()
}

// layout recomputes the visible rows, keeping the selection on the same
// span, or on the newest row while following.
func (b *browser) layout() {
	var keep *wire.SpanRecord
	if r := b.selected(); r != nil && !b.follow {
		keep = r.span
	}
	b.rows = b.rows[:0]
	for _, t := range b.traces {
		for _, root := range b.roots(t) {
			b.walk(t, root, 0)
		}
	}
	switch {
	case b.follow || keep == nil:
		b.cursor = max(len(b.rows)-1, 0)
	default:
		for i, r := range b.rows {
			if r.span == keep {
				b.cursor = i
				break
			}
		}
		b.cursor = min(b.cursor, max(len(b.rows)-1, 0))
	}
}

func (b *browser) walk(t *traceView, sp *wire.SpanRecord, depth int) {
	b.rows = append(b.rows, row{trace: t, span: sp, depth: depth})
	if t.collapsed[sp.SpanID] {
		return
	}
	for _, c := range b.children(t, sp.SpanID) {
		b.walk(t, c, depth+1)
	}
}

// roots are the spans whose parent is not in the trace, by start time.
func (b *browser) roots(t *traceView) []*wire.SpanRecord {
	var out []*wire.SpanRecord
	for _, sp := range t.spans {
		if _, ok := t.spans[sp.ParentID]; !ok || sp.ParentID == "" {
			out = append(out, sp)
		}
	}
	byStart(out)
	return out
}

func (b *browser) children(t *traceView, id string) []*wire.SpanRecord {
	var out []*wire.SpanRecord
	for _, sp := range t.spans {
		if sp.ParentID == id && sp.SpanID != id {
			out = append(out, sp)
		}
	}
	byStart(out)
	return out
}

func byStart(s []*wire.SpanRecord) {
	sort.Slice(s, func(i, j int) bool {
		if !s[i].Start.Equal(s[j].Start) {
			return s[i].Start.Before(s[j].Start)
		}
		return s[i].SpanID < s[j].SpanID
	})
}

func hasOutcome(sp *wire.SpanRecord) bool {
	_, ok := sp.Attributes[engine.AttrResult]
	return ok || sp.Status == "error"
}

func (b *browser) View() string {
	if b.inspect != nil {
		return b.inspector()
	}
	var out []string
	title := fmt.Sprintf("svc trace tail · %s · %d traces", b.sidecar, len(b.traces))
	if b.dropped > 0 {
		title += fmt.Sprintf(" · %d spans dropped by the sidecar", b.dropped)
	}
	if b.ended {
		title += " · stream ended"
	}
	out = append(out, b.st.title.Render(title))
	help := "↑/↓ select · enter expand/collapse · v inspect · q quit"
	var lines []string
	sel := 0
	var lastTrace *traceView
	for i, r := range b.rows {
		if r.trace != lastTrace {
			lines = append(lines, b.traceLine(r.trace))
			lastTrace = r.trace
		}
		if i == b.cursor {
			sel = len(lines)
		}
		lines = append(lines, b.spanLine(r, i == b.cursor))
		if r.trace.detailed[r.span.SpanID] {
			for _, d := range b.details(r) {
				lines = append(lines, strings.Repeat("  ", r.depth+2)+d)
			}
		}
	}
	if len(lines) == 0 {
		lines = append(lines, b.st.faint.Render("waiting for decisions…"))
	}
	avail := max(b.height-3, 1)
	start := 0
	if len(lines) > avail {
		start = min(max(sel-avail/2, 0), len(lines)-avail)
		if b.follow {
			start = len(lines) - avail
		}
	}
	end := min(start+avail, len(lines))
	out = append(out, lines[start:end]...)
	for len(out) < avail+1 {
		out = append(out, "")
	}
	out = append(out, b.st.faint.Render(help))
	return strings.Join(out, "\n")
}

// traceLine is a trace's header: id, outcome and intent.
func (b *browser) traceLine(t *traceView) string {
	var eval, verify *wire.SpanRecord
	var total time.Duration
	for _, sp := range t.spans {
		switch sp.Name {
		case engine.SpanEvaluate:
			eval = sp
		case engine.SpanVerifyToken:
			verify = sp
		}
		if _, ok := t.spans[sp.ParentID]; !ok && sp.Duration > total {
			total = sp.Duration
		}
	}
	parts := []string{b.st.faint.Render("trace " + shortID(t.id))}
	switch {
	case eval != nil:
		parts = append(parts, b.result(eval), b.intent(eval))
		if r := eval.Attributes[engine.AttrReason]; r != "" {
			parts = append(parts, "reason="+r)
		}
	case verify != nil:
		parts = append(parts, b.result(verify))
		if r := verify.Attributes[engine.AttrReason]; r != "" {
			parts = append(parts, "reason="+r)
		}
	}
	parts = append(parts, b.st.dur.Render(fmtDur(total)))
	return strings.Join(parts, "  ")
}

func (b *browser) result(sp *wire.SpanRecord) string {
	switch {
	case sp.Status == "error":
		return b.st.err.Render("ERROR")
	case sp.Attributes[engine.AttrResult] == "allow":
		return b.st.allow.Render("ALLOW")
	case sp.Attributes[engine.AttrResult] == "deny":
		return b.st.deny.Render("DENY")
	}
	return ""
}

func (b *browser) intent(sp *wire.SpanRecord) string {
	s := sp.Attributes[engine.AttrAction]
	if r := sp.Attributes[engine.AttrResource]; r != "" {
		s += " on " + r
	}
	return s
}

func (b *browser) spanLine(r row, selected bool) string {
	sp := r.span
	marker := "  "
	switch {
	case len(b.children(r.trace, sp.SpanID)) > 0 && r.trace.collapsed[sp.SpanID]:
		marker = "▸ "
	case len(b.children(r.trace, sp.SpanID)) > 0 || r.trace.detailed[sp.SpanID]:
		marker = "▾ "
	case hasOutcome(sp):
		marker = "▸ "
	}
	name := strings.Repeat("  ", r.depth+1) + marker + sp.Name
	line := fmt.Sprintf("%-58s %10s", name, fmtDur(sp.Duration))
	if res := b.result(sp); res != "" {
		line += "  " + res
	}
	if selected {
		return b.st.sel.Render(line)
	}
	return line
}

// details are the outcome lines of an expanded span.
func (b *browser) details(r row) []string {
	a := r.span.Attributes
	var out []string
	add := func(label, v string) {
		if v != "" && v != "[]" {
			out = append(out, b.st.key.Render(label+":")+" "+v)
		}
	}
	add("result", a[engine.AttrResult])
	add("reason", a[engine.AttrReason])
	add("matched rule", a[engine.AttrMatchedRule])
	add("deny reasons", denyReasons(a[engine.AttrDenyReasons]))
	add("intent", b.intent(r.span))
	add("tenant", a[engine.AttrTenant])
	add("decision", a[engine.AttrDecisionID])
	if r.span.Status == "error" {
		add("error", r.span.StatusMessage)
	}
	return out
}

func denyReasons(v string) string {
	var rs []string
	if json.Unmarshal([]byte(v), &rs) == nil {
		return strings.Join(rs, "; ")
	}
	return v
}

// inspector shows the selected span's attributes and, for
// policy.evaluate, the policy input the decision saw.
func (b *browser) inspector() string {
	sp := b.inspect.span
	var lines []string
	lines = append(lines, b.st.title.Render(fmt.Sprintf("%s · trace %s · span %s · %s", sp.Name, shortID(sp.TraceID), sp.SpanID, fmtDur(sp.Duration))))
	lines = append(lines, "", b.st.title.Render("attributes"))
	keys := make([]string, 0, len(sp.Attributes))
	for k := range sp.Attributes {
		if k != engine.AttrInput {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		lines = append(lines, "  "+b.st.key.Render(k)+" = "+sp.Attributes[k])
	}
	lines = append(lines, fmt.Sprintf("  %s = %s", b.st.key.Render("status"), sp.Status))
	if in := sp.Attributes[engine.AttrInput]; in != "" {
		lines = append(lines, "", b.st.title.Render("policy input")+b.st.faint.Render(" (claims other than sub, tenant_id and roles redacted)"))
		var pretty bytes.Buffer
		if json.Indent(&pretty, []byte(in), "  ", "  ") == nil {
			lines = append(lines, strings.Split("  "+pretty.String(), "\n")...)
		} else {
			lines = append(lines, "  "+in)
		}
	} else if sp.Name == engine.SpanEvaluate {
		lines = append(lines, "", b.st.faint.Render("no policy input on this span (it was recorded while no tail watched)"))
	}
	avail := max(b.height-2, 1)
	start := min(b.scroll, max(len(lines)-avail, 0))
	b.scroll = start
	view := lines[start:min(start+avail, len(lines))]
	for len(view) < avail {
		view = append(view, "")
	}
	return strings.Join(append(view, b.st.faint.Render("↑/↓ scroll · esc or v back · q quit")), "\n")
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// fmtDur shows a duration with three significant digits: 812µs, 1.23ms.
func fmtDur(d time.Duration) string {
	switch {
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", d.Nanoseconds())
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}
