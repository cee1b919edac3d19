// Package flagutil holds the small helpers the commands share for their
// flags.
package flagutil

import "strings"

// SplitList flattens a repeated flag whose values may also be
// comma-separated lists (as environment variables carry them), dropping
// empty items and surrounding space.
func SplitList(values []string) []string {
	var out []string
	for _, v := range values {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}
