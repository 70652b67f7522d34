package main

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// The section of docs/benchmarks.md benchscale owns: everything between
// the two markers is rewritten by -write.
const (
	docBegin = "<!-- bench-scale: begin (written by make bench-scale) -->"
	docEnd   = "<!-- bench-scale: end -->"
)

// commands gives the command that re-runs each row.
var commands = map[string]string{
	"data":        "go run ./scripts/benchscale -row data",
	"policy-size": "go run ./scripts/benchscale -row policy-size",
	"tokens":      "go run ./scripts/benchscale -row tokens",
	"tenants":     "go run ./scripts/benchscale -row tenants",
	"bundles":     "go run ./scripts/benchscale -row bundles",
	"http-check":  "go run ./scripts/benchscale -row http-check",
}

// writeDoc replaces the bench-scale section of the Markdown file path
// (appending it when the file has none) with the table and the curves.
func writeDoc(path string, results []result, o options) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString(docBegin + "\n\n")
	fmt.Fprintf(&b, "Measured %s, load average %s at the end; every figure of a row comes from one run of its command, its points one after the other.", time.Now().UTC().Format("2006-01-02"), loadavg())
	if o.quick {
		b.WriteString(" **Quick run (-quick): smaller points than the rows name.**")
	}
	b.WriteString("\n\n| axis | what | measured | bound | command |\n|---|---|---|---|---|\n")
	for _, r := range results {
		b.WriteString(tableLine(r, ""))
	}
	b.WriteString("\nThe curves (text plots, one bar per point, scaled to the row's largest value):\n\n```\n")
	for _, r := range results {
		if len(r.Curve) == 0 {
			continue
		}
		b.WriteString(plot(r))
		b.WriteString("\n")
	}
	b.WriteString("```\n\n" + docEnd)
	text := string(old)
	i, j := strings.Index(text, docBegin), strings.Index(text, docEnd)
	switch {
	case i >= 0 && j > i:
		text = text[:i] + b.String() + text[j+len(docEnd):]
	default:
		text = strings.TrimRight(text, "\n") + "\n\n## Performance as the work grows\n\n" + b.String() + "\n"
	}
	return os.WriteFile(path, []byte(text), 0o644)
}

// tableLine is a row's line of the table; note, when not empty, says
// when and how the row alone was measured.
func tableLine(r result, note string) string {
	verdict := "✓"
	if !r.Met {
		verdict = "✗"
	}
	bound := r.Bound + " " + verdict
	if r.Bound == "" {
		bound = "(reported)"
	}
	measured := note + strings.TrimRight(r.Figures, "; .")
	if r.Why != "" {
		measured += ". " + r.Why
	}
	return fmt.Sprintf("| %s | %s | %s | %s | `%s` |\n", r.Row, cell(r.What), cell(measured), cell(bound), commands[r.Row])
}

// writeDocRow replaces one row's line of the table and its curve in the
// bench-scale section of the Markdown file path, leaving the other rows
// as their last run wrote them; the line says when the row was measured.
func writeDocRow(path string, r result, o options) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	text := string(old)
	i, j := strings.Index(text, docBegin), strings.Index(text, docEnd)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no bench-scale section to update: run every row with -write", path)
	}
	section := text[i:j]
	start := strings.Index(section, "\n| "+r.Row+" | ")
	if start < 0 {
		return fmt.Errorf("%s has no %s row to update: run every row with -write", path, r.Row)
	}
	start++
	end := start + strings.Index(section[start:], "\n") + 1
	note := fmt.Sprintf("(measured alone %s, load average %s) ", time.Now().UTC().Format("2006-01-02"), loadavg())
	if o.quick {
		note += "**Quick run (-quick): smaller points than the row names.** "
	}
	section = section[:start] + tableLine(r, note) + section[end:]
	if len(r.Curve) > 0 {
		head := fmt.Sprintf("%s (", r.Row)
		if ps := strings.Index(section, "\n"+head); ps >= 0 {
			ps++
			pe := strings.Index(section[ps:], "\n\n")
			if pe < 0 {
				return fmt.Errorf("%s: the %s curve has no end", path, r.Row)
			}
			section = section[:ps] + strings.TrimSuffix(plot(r), "\n") + section[ps+pe:]
		}
	}
	return os.WriteFile(path, []byte(text[:i]+section+text[j:]), 0o644)
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// plot draws a row's curve as horizontal bars.
func plot(r result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s)\n", r.Row, r.CurveUnit)
	top, width := 0.0, 0
	for _, p := range r.Curve {
		top = max(top, p.Value)
		width = max(width, len(p.Label))
	}
	for _, p := range r.Curve {
		n := 0
		if top > 0 {
			n = int(p.Value/top*50 + 0.5)
		}
		fmt.Fprintf(&b, "  %-*s %s %s\n", width, p.Label, strings.Repeat("█", max(n, 1)), num(p.Value))
	}
	return b.String()
}

func num(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}
