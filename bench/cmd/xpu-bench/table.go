package main

import (
	"fmt"
	"io"
	"strings"
)

// Status of a row.
type Status string

// Row statuses. INFO rows have no target; SKIP rows could not be measured
// (the reason is in the value).
const (
	Pass Status = "PASS"
	Miss Status = "MISS"
	Info Status = "INFO"
	Skip Status = "SKIP"
	Fail Status = "FAIL"
)

// Row is one line of the results table.
type Row struct {
	Section string
	Name    string
	Value   string
	Target  string
	Status  Status
}

// check returns Pass when ok, Miss otherwise.
func check(ok bool) Status {
	if ok {
		return Pass
	}
	return Miss
}

// failRow reports a measurement that could not be made.
func failRow(section, name string, err error) Row {
	return Row{Section: section, Name: name, Value: "error: " + oneLine(err.Error()), Target: "", Status: Fail}
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// writeMarkdown writes rows as one markdown table.
func writeMarkdown(w io.Writer, rows []Row) error {
	var b strings.Builder
	b.WriteString("| # | what | measured | target | status |\n|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", cell(r.Section), cell(r.Name), cell(r.Value), cell(r.Target), r.Status)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// cell escapes what would break a markdown table cell.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

// writeText writes rows as an aligned plain-text table for the terminal.
func writeText(w io.Writer, rows []Row) error {
	head := Row{Section: "#", Name: "what", Value: "measured", Target: "target", Status: "status"}
	all := append([]Row{head}, rows...)
	var wS, wN, wV, wT int
	for _, r := range all {
		wS, wN, wV, wT = max(wS, len(r.Section)), max(wN, len(r.Name)), max(wV, len(r.Value)), max(wT, len(r.Target))
	}
	var b strings.Builder
	for i, r := range all {
		fmt.Fprintf(&b, "%-*s  %-*s  %-*s  %-*s  %s\n", wS, r.Section, wN, r.Name, wV, r.Value, wT, r.Target, r.Status)
		if i == 0 {
			b.WriteString(strings.Repeat("-", wS+wN+wV+wT+8+6) + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
