package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/xpu-cdi/xpu-cdi/tests/e2e/harness"
)

// httpGet returns the body of a 200 answer for u, or an error.
func httpGet(u string) (string, error) {
	resp, err := http.Get(u)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", u, resp.Status, body)
	}
	return string(body), nil
}

// promResult is the answer of Prometheus' instant query API.
type promResult struct {
	Status string `json:"status"`
	Error  string `json:"error"`
	Data   struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	} `json:"data"`
}

func promQuery(t testing.TB, base, q string) promResult {
	t.Helper()
	body, err := httpGet(base + "/api/v1/query?query=" + url.QueryEscape(q))
	require.NoError(t, err, q)
	var r promResult
	require.NoError(t, json.Unmarshal([]byte(body), &r), body)
	require.Equal(t, "success", r.Status, "%s: %s", q, r.Error)
	return r
}

// promValue is the value of the one series q answers, -1 while there is
// none.
func promValue(t testing.TB, base, q string) float64 {
	t.Helper()
	res := promQuery(t, base, q)
	if len(res.Data.Result) != 1 {
		return -1
	}
	v, err := strconv.ParseFloat(res.Data.Result[0].Value[1].(string), 64)
	require.NoError(t, err)
	return v
}

// promtoolCheckMetrics fails the test unless `promtool check metrics`
// has nothing to say about the exposition scrape (of what).
func promtoolCheckMetrics(t testing.TB, scrape, what string) {
	t.Helper()
	check := exec.Command(harness.RequiresTool(t, "promtool"), "check", "metrics")
	check.Stdin = strings.NewReader(scrape)
	out, err := check.CombinedOutput()
	require.NoError(t, err, "promtool check metrics of %s:\n%s", what, out)
	require.Empty(t, strings.TrimSpace(string(out)), "promtool check metrics of %s", what)
}

// staticScrapeJob is a Prometheus scrape job of fixed targets
// (host:port).
func staticScrapeJob(name string, targets ...string) map[string]any {
	return map[string]any{"job_name": name, "static_configs": []any{map[string]any{"targets": targets}}}
}

// startPrometheus runs a real Prometheus (Debian's) with the
// configuration of prometheusConfig and returns its base URL once it is
// ready. It is killed at the end of the test.
func startPrometheus(t *testing.T, jobs ...map[string]any) string {
	t.Helper()
	prometheus := harness.RequiresTool(t, "prometheus")
	dir := t.TempDir()
	config := prometheusConfig(t, dir, jobs...)
	port := harness.FreePort(t)
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	startProcess(t, prometheus, "--config.file="+config, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address=127.0.0.1:"+strconv.Itoa(port))
	require.Eventually(t, func() bool { _, err := httpGet(base + "/-/ready"); return err == nil }, podTimeout, 250*time.Millisecond)
	return base
}

// prometheusConfig writes dir/prometheus.yml: the jobs (scrape_configs
// entries), scraped and evaluated every second, passed by `promtool check
// config`. It returns the file's path.
func prometheusConfig(t testing.TB, dir string, jobs ...map[string]any) string {
	t.Helper()
	promtool := harness.RequiresTool(t, "promtool")
	config := filepath.Join(dir, "prometheus.yml")
	data, err := yaml.Marshal(map[string]any{
		"global":         map[string]any{"scrape_interval": "1s", "evaluation_interval": "1s"},
		"scrape_configs": jobs,
	})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(config, data, 0o644))
	out, err := exec.Command(promtool, "check", "config", config).CombinedOutput()
	require.NoError(t, err, "promtool check config:\n%s\n%s", out, data)
	return config
}

// dashboardQuery is one PromQL expression of a Grafana dashboard's panel,
// with the $instance variable matching every instance.
type dashboardQuery struct {
	Panel, Expr string
}

// dashboardQueries returns every panel query of the chart's dashboard
// file (dashboards/NAME.json).
func dashboardQueries(t testing.TB, file string) []dashboardQuery {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), "deployments", "helm", "xpu-cdi", "dashboards", file))
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(data, &dash), file)
	var out []dashboardQuery
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			out = append(out, dashboardQuery{Panel: p.Title, Expr: strings.ReplaceAll(tg.Expr, "$instance", ".*")})
		}
	}
	require.NotEmpty(t, out, "%s has no queries", file)
	return out
}

// The scrape jobs the Prometheus tests run with are a configuration
// promtool accepts: the static jobs and the one the operator makes of the
// chart's ServiceMonitor. No cluster.
func TestPrometheusScrapeConfig(t *testing.T) {
	_, operatorJob := operatorScrapeConfig(t, 9400)
	config := prometheusConfig(t, t.TempDir(), staticScrapeJob("xpu", "127.0.0.1:9400"),
		staticScrapeJob("xpu-dra-driver", draHealthAddress), operatorJob)
	data, err := os.ReadFile(config)
	require.NoError(t, err)
	var parsed struct {
		ScrapeConfigs []struct {
			JobName string `json:"job_name"`
		} `json:"scrape_configs"`
	}
	require.NoError(t, yaml.Unmarshal(data, &parsed))
	require.Len(t, parsed.ScrapeConfigs, 3, "%s", data)
	require.Equal(t, "xpu", parsed.ScrapeConfigs[0].JobName)
	require.Equal(t, "serviceMonitor/xpu-system/xpu-xpu-cdi-exporter/0", parsed.ScrapeConfigs[2].JobName)
}
