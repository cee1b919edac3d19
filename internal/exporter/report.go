package exporter

import "strings"

// maxReports bounds the messages of one source remembered as logged.
const maxReports = 32

// reports is what was logged of one source since it last worked.
type reports struct {
	seen map[string]bool
	// full is set once a message past maxReports was left unlogged.
	full bool
}

// report logs msg of source once until the source recovers. A skipped
// line of xpu-smi output is reported once per shape (shape: the line and
// the numbers left out), as the values it quotes (temperature, power, the
// line number) change at each collection; other messages once per text. At most
// maxReports are remembered per source; past them, one more warning says
// that the rest is not logged.
func (c *Collector) report(source, msg string) {
	r := c.reported[source]
	if r == nil {
		r = &reports{seen: map[string]bool{}}
		c.reported[source] = r
	}
	key := msg
	if source == sourceXPUSMILines {
		key = shape(msg)
	}
	switch {
	case r.seen[key]:
	case len(r.seen) < maxReports:
		r.seen[key] = true
		c.o.Log.Warnf("%s: %s", source, msg)
	case !r.full:
		r.full = true
		c.o.Log.Warnf("%s: more than %d kinds of failure; the others are not logged until it works again", source, maxReports)
	}
}

// recovered forgets what was reported of source, logging that it works
// again when something was.
func (c *Collector) recovered(source string) {
	if r := c.reported[source]; r != nil && len(r.seen) > 0 {
		c.o.Log.Infof("%s: readable again", source)
	}
	delete(c.reported, source)
}

// shape is what kind of failure msg tells: msg up to the first text it
// quotes (an xpu-smi line, a field's value, cut to a length that the
// widths of its numbers move), with every number (a run of digits and the
// decimal points between them) replaced by "#". `line 3: 33 fields, not 32:
// "xpu 0 45 80.5"` and `line 1: 33 fields, not 32: "xpu 0 61 93"` are one
// shape.
func shape(msg string) string {
	msg, _, _ = strings.Cut(msg, `"`)
	var b strings.Builder
	b.Grow(len(msg))
	inNumber := false
	for i := 0; i < len(msg); i++ {
		ch := msg[i]
		digit := ch >= '0' && ch <= '9'
		point := inNumber && ch == '.' && i+1 < len(msg) && msg[i+1] >= '0' && msg[i+1] <= '9'
		switch {
		case (digit || point) && inNumber:
		case digit:
			b.WriteByte('#')
			inNumber = true
		default:
			b.WriteByte(ch)
			inNumber = false
		}
	}
	return b.String()
}
