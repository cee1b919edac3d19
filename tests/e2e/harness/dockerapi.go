package harness

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// DockerAPIVersion is the Engine API version the tests speak: Docker 25 and
// later serve it (v1.44); DeviceRequests with Driver "cdi" is how
// `docker run --device vendor/class=name` reaches the daemon.
const DockerAPIVersion = "v1.44"

// dockerAPIMaxBody bounds what the client reads of one answer.
const dockerAPIMaxBody = 16 << 20

// DockerClient speaks the Docker Engine API over a unix socket: the part a
// test needs of what the docker CLI does (trixie ships dockerd without the
// CLI).
type DockerClient struct {
	socket string
	http   *http.Client
}

// DockerAPI returns a client of the daemon listening on socket.
func DockerAPI(socket string) *DockerClient {
	return &DockerClient{socket: socket, http: &http.Client{
		Timeout: CommandTimeout,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}},
	}}
}

// DockerError is an answer of the daemon with an error status.
type DockerError struct {
	Status  int
	Message string
}

func (e *DockerError) Error() string { return fmt.Sprintf("docker API: %d: %s", e.Status, e.Message) }

// do sends a request and decodes a JSON answer into out (when not nil).
func (c *DockerClient) do(ctx context.Context, method, path string, query url.Values, body io.Reader, contentType string, out any) ([]byte, error) {
	u := "http://docker/" + DockerAPIVersion + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("docker API %s %s on %s: %w", method, path, c.socket, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, dockerAPIMaxBody))
	if err != nil {
		return nil, fmt.Errorf("docker API %s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		var msg struct{ Message string }
		if json.Unmarshal(data, &msg) != nil || msg.Message == "" {
			msg.Message = strings.TrimSpace(string(data))
		}
		return data, &DockerError{Status: resp.StatusCode, Message: msg.Message}
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return data, fmt.Errorf("docker API %s %s: decoding %q: %w", method, path, data, err)
		}
	}
	return data, nil
}

// DockerVersion is what GET /version says.
type DockerVersion struct {
	Version    string
	APIVersion string
}

// Version asks the daemon for its version.
func (c *DockerClient) Version(ctx context.Context) (DockerVersion, error) {
	var v DockerVersion
	_, err := c.do(ctx, http.MethodGet, "/version", nil, nil, "", &v)
	return v, err
}

// ImportImage imports the tar archive tarPath as image name:latest with
// CMD /bin/sh (`docker import`).
func (c *DockerClient) ImportImage(ctx context.Context, tarPath, name string) error {
	f, err := os.Open(tarPath)
	if err != nil {
		return err
	}
	defer f.Close()
	q := url.Values{"fromSrc": {"-"}, "repo": {name}, "tag": {"latest"}, "changes": {`CMD ["/bin/sh"]`}}
	data, err := c.do(ctx, http.MethodPost, "/images/create", q, f, "application/x-tar", nil)
	if err != nil {
		return err
	}
	// A progress stream of JSON messages; a failure is one with "error".
	dec := json.NewDecoder(bytes.NewReader(data))
	for dec.More() {
		var m struct{ Error string }
		if err := dec.Decode(&m); err != nil {
			return fmt.Errorf("docker import %s: decoding the progress: %w", name, err)
		}
		if m.Error != "" {
			return fmt.Errorf("docker import %s: %s", name, m.Error)
		}
	}
	return nil
}

// DockerRun is one container to run to completion.
type DockerRun struct {
	Image string
	Cmd   []string
	// CDIDevices are qualified CDI names, sent as one DeviceRequest with
	// Driver "cdi": what `docker run --device NAME` sends for a CDI name.
	CDIDevices []string
	// Runtime is HostConfig.Runtime ("" for the daemon's default).
	Runtime string
	Env     []string
}

// RunToCompletion creates, starts and waits for the container (no network),
// returns its exit status and output, and removes it. A refusal by the
// daemon is returned as a *DockerError.
func (c *DockerClient) RunToCompletion(ctx context.Context, r DockerRun) (int, string, error) {
	host := map[string]any{"NetworkMode": "none", "Runtime": r.Runtime}
	if len(r.CDIDevices) > 0 {
		host["DeviceRequests"] = []map[string]any{{"Driver": "cdi", "DeviceIDs": r.CDIDevices}}
	}
	body, err := json.Marshal(map[string]any{"Image": r.Image, "Cmd": r.Cmd, "Env": r.Env, "HostConfig": host})
	if err != nil {
		return 0, "", err
	}
	var created struct{ ID string }
	if _, err := c.do(ctx, http.MethodPost, "/containers/create", nil, bytes.NewReader(body), "application/json", &created); err != nil {
		return 0, "", err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = c.do(ctx, http.MethodDelete, "/containers/"+created.ID, url.Values{"force": {"1"}}, nil, "", nil)
	}()
	if _, err := c.do(ctx, http.MethodPost, "/containers/"+created.ID+"/start", nil, nil, "", nil); err != nil {
		return 0, "", err
	}
	var waited struct {
		StatusCode int
		Error      *struct{ Message string }
	}
	if _, err := c.do(ctx, http.MethodPost, "/containers/"+created.ID+"/wait", nil, nil, "", &waited); err != nil {
		return 0, "", err
	}
	if waited.Error != nil && waited.Error.Message != "" {
		return waited.StatusCode, "", fmt.Errorf("docker wait %s: %s", created.ID, waited.Error.Message)
	}
	logs, err := c.do(ctx, http.MethodGet, "/containers/"+created.ID+"/logs", url.Values{"stdout": {"1"}, "stderr": {"1"}}, nil, "", nil)
	if err != nil {
		return waited.StatusCode, "", err
	}
	out, err := demuxDockerLogs(logs)
	return waited.StatusCode, out, err
}

// demuxDockerLogs joins the frames of a container's log stream (no TTY:
// each frame is a stream byte, three zero bytes, a big-endian length and
// the payload).
func demuxDockerLogs(data []byte) (string, error) {
	var out strings.Builder
	for len(data) > 0 {
		if len(data) < 8 {
			return out.String(), errors.New("docker logs: a truncated frame header")
		}
		n := binary.BigEndian.Uint32(data[4:8])
		if uint64(len(data)-8) < uint64(n) {
			return out.String(), errors.New("docker logs: a truncated frame")
		}
		out.Write(data[8 : 8+n])
		data = data[8+n:]
	}
	return out.String(), nil
}
