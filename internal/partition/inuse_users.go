package partition

import (
	"bytes"
	"strconv"

	"github.com/xpu-cdi/xpu-cdi/internal/rootfs"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// passwdLimit bounds the read of the dev root's /etc/passwd.
const passwdLimit = 4 << 20

// userNames maps the uids of the dev root's /etc/passwd to their names,
// for the note of a scan that did not finish; an empty map when there is
// none (a fake host) or it may not be read. The file is resolved inside
// the dev root and read bounded; the names are escaped
// (discover.CleanText), since a user's name reaches the admin's terminal.
func userNames(devRoot string) map[int]string {
	out := map[int]string{}
	r, err := rootfs.Open(devRoot)
	if err != nil {
		return out
	}
	defer r.Close()
	data, err := r.ReadFile("/etc/passwd", passwdLimit)
	if err != nil {
		return out
	}
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		f := bytes.SplitN(line, []byte(":"), 4)
		if len(f) < 4 {
			continue
		}
		uid, err := strconv.Atoi(string(f[2]))
		if _, dup := out[uid]; err != nil || dup {
			continue
		}
		out[uid] = discover.CleanText(string(f[0]))
	}
	return out
}
