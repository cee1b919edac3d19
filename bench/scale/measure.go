package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// etcdDBSize reads etcd's database size (total and in use) from its
// /metrics at url.
func etcdDBSize(ctx context.Context, url string) (total, inUse int64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return 0, 0, fmt.Errorf("asking etcd for its metrics: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("asking etcd for its metrics: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("GET %s/metrics: %s", url, resp.Status)
	}
	// etcd's whole exposition is a few hundred KiB; 4 MiB bounds a broken one.
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return 0, 0, fmt.Errorf("reading etcd's metrics: %w", err)
	}
	gauge := func(name string) (int64, bool) {
		f := families[name]
		if f == nil || len(f.GetMetric()) == 0 || f.GetMetric()[0].GetGauge() == nil {
			return 0, false
		}
		return int64(f.GetMetric()[0].GetGauge().GetValue()), true
	}
	total, ok := gauge("etcd_mvcc_db_total_size_in_bytes")
	if !ok {
		return 0, 0, fmt.Errorf("etcd's metrics have no gauge etcd_mvcc_db_total_size_in_bytes")
	}
	inUse, _ = gauge("etcd_mvcc_db_total_size_in_use_in_bytes")
	return total, inUse, nil
}

// sliceBytes is the number of ResourceSlices and the size of their JSON
// as the API server serves them (metadata included).
func sliceBytes(ctx context.Context, client kubernetes.Interface) (int, int64, error) {
	list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, fmt.Errorf("listing ResourceSlices: %w", err)
	}
	var total int64
	for i := range list.Items {
		b, err := json.Marshal(&list.Items[i])
		if err != nil {
			return 0, 0, fmt.Errorf("encoding ResourceSlice %s: %w", list.Items[i].Name, err)
		}
		total += int64(len(b))
	}
	return len(list.Items), total, nil
}

// load1 is the 1-minute load average of the machine (0 if unreadable).
func load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _, _ := strings.Cut(string(b), " ")
	v, _ := strconv.ParseFloat(f, 64)
	return v
}

// latencies turns creation and binding times into sorted latencies, the
// first creation and the last binding.
func latencies(created, bound map[string]time.Time) (lat []time.Duration, first, last time.Time) {
	for name, c := range created {
		if first.IsZero() || c.Before(first) {
			first = c
		}
		b, ok := bound[name]
		if !ok {
			continue
		}
		if b.After(last) {
			last = b
		}
		lat = append(lat, b.Sub(c))
	}
	slices.Sort(lat)
	return lat, first, last
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
