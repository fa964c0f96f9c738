// clientgo-storm: the reconnect-storm benchmark's client-go side (issue 10), and its loader.
//
//	clientgo-storm run  -marker V -ready-file F -times-file F [-namespaces 50] [-prefix storm-]
//	    One clientset (default rest config from the kubeconfig, protobuf for built-in types),
//	    one SharedInformerFactory per namespace (WithNamespace), one Pod informer each, every
//	    client-go default left alone (WatchListClient on in v0.36, QPS 5 / burst 10 for
//	    non-watch requests, the reflector's backoff). Counts every request the process sends
//	    with a wrapping http.RoundTripper (rest.Config.Wrap). Writes -ready-file once synced;
//	    the driver then restarts the API server, writes -times-file ("<restart begin wall ns>
//	    <server ready wall ns>") and runs `clientgo-storm mark`. Recovered, time to recover and
//	    the request counts are defined as in kinformer's storm_bench.cc. Prints one JSON line.
//	clientgo-storm load -namespaces N -pods P [-prefix storm-]
//	    Makes namespaces <prefix>0..N-1 exist, each with Pods pod-0..pod-P-1 (idempotent).
//	clientgo-storm mark -namespaces N -value V [-prefix storm-]
//	    Merge-patches pod-0 of every namespace with annotation bench.kinformer.dev/storm-marker=V
//	    (concurrently; one try per namespace, then retries of the failed ones for up to 30 s).
//
// load and mark refuse a server that is not on a loopback address. Every wait is bounded.
// silent-proxy, watch-pods, create-pod and delete-pod (silent.sh's) are described in silent.go.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

const markerAnnotation = "bench.kinformer.dev/storm-marker"

func die(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "clientgo-storm: "+format+"\n", args...)
	os.Exit(2)
}

func config(kubeconfig string) *rest.Config {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		die("%v", err)
	}
	// As the other peers: protobuf for built-in types, as client-go's generated clients ask for.
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return cfg
}

func loopbackOnly(cfg *rest.Config) {
	u, err := url.Parse(cfg.Host)
	if err != nil {
		die("server %q: %v", cfg.Host, err)
	}
	if ip := net.ParseIP(u.Hostname()); u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
		die("server %s is not on a loopback address; refusing to write to it", cfg.Host)
	}
}

func adminClient(kubeconfig string) *kubernetes.Clientset {
	cfg := config(kubeconfig)
	loopbackOnly(cfg)
	cfg.QPS = -1 // the loader is not the measured client
	cfg.Timeout = 30 * time.Second
	cfg.UserAgent = "clientgo-storm-loader"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		die("%v", err)
	}
	return cs
}

func nsName(prefix string, i int) string { return fmt.Sprintf("%s%d", prefix, i) }

func load(args []string) {
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file")
	prefix := fs.String("prefix", "storm-", "namespace prefix")
	n := fs.Int("namespaces", 50, "namespaces")
	pods := fs.Int("pods", 3, "Pods per namespace")
	_ = fs.Parse(args)
	cs := adminClient(*kubeconfig)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var failed atomic.Int64
	sem := make(chan struct{}, 16)
	for i := 0; i < *n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			ns := nsName(*prefix, i)
			_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				fmt.Fprintf(os.Stderr, "clientgo-storm load: namespace %s: %v\n", ns, err)
				failed.Add(1)
				return
			}
			for p := 0; p < *pods; p++ {
				pod := &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", p), Namespace: ns, Labels: map[string]string{"app": "storm"}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
				}
				_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
				if err != nil && !apierrors.IsAlreadyExists(err) {
					fmt.Fprintf(os.Stderr, "clientgo-storm load: pod %s/%s: %v\n", ns, pod.Name, err)
					failed.Add(1)
				}
			}
		}(i)
	}
	wg.Wait()
	if failed.Load() > 0 {
		os.Exit(1)
	}
}

func mark(args []string) {
	fs := flag.NewFlagSet("mark", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file")
	prefix := fs.String("prefix", "storm-", "namespace prefix")
	n := fs.Int("namespaces", 50, "namespaces")
	value := fs.String("value", "", "marker value")
	_ = fs.Parse(args)
	if *value == "" {
		die("mark: -value is required")
	}
	cs := adminClient(*kubeconfig)
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{markerAnnotation: *value}}})
	deadline := time.Now().Add(30 * time.Second)
	pending := make([]int, *n)
	for i := range pending {
		pending[i] = i
	}
	for len(pending) > 0 && time.Now().Before(deadline) {
		var mu sync.Mutex
		var again []int
		var wg sync.WaitGroup
		for _, i := range pending {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_, err := cs.CoreV1().Pods(nsName(*prefix, i)).Patch(ctx, "pod-0", types.MergePatchType, patch, metav1.PatchOptions{})
				if err != nil {
					mu.Lock()
					again = append(again, i)
					mu.Unlock()
				}
			}(i)
		}
		wg.Wait()
		pending = again
		if len(pending) > 0 {
			time.Sleep(200 * time.Millisecond)
		}
	}
	if len(pending) > 0 {
		die("mark: %d namespaces not marked within 30 s", len(pending))
	}
}

type request struct {
	ns   int64
	kind string // list, watch, watchlist
	ok   bool
}

type countingTransport struct {
	next http.RoundTripper
	mu   sync.Mutex
	log  []request
}

func (t *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	q := r.URL.Query()
	kind := "list"
	if w := q.Get("watch"); w == "1" || w == "true" {
		kind = "watch"
		if q.Get("sendInitialEvents") == "true" {
			kind = "watchlist"
		}
	}
	resp, err := t.next.RoundTrip(r)
	ok := err == nil && resp.StatusCode < 400
	t.mu.Lock()
	t.log = append(t.log, request{time.Now().UnixNano(), kind, ok})
	t.mu.Unlock()
	return resp, err
}

func (t *countingTransport) entries() []request {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]request(nil), t.log...)
}

func readTimes(path string) (int64, int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, false
	}
	var begin, ready int64
	if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &begin, &ready); err != nil {
		return 0, 0, false
	}
	return begin, ready, true
}

func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return -1
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	i := int(q*float64(len(s)-1) + 0.5)
	if i >= len(s) {
		i = len(s) - 1
	}
	return s[i]
}

func run(args []string) {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file")
	prefix := fs.String("prefix", "storm-", "namespace prefix")
	n := fs.Int("namespaces", 50, "namespaces, one Pod informer each")
	marker := fs.String("marker", "", "marker value to wait for")
	readyFile := fs.String("ready-file", "", "written once synced")
	timesFile := fs.String("times-file", "", "restart begin and server ready (wall ns), written by the driver")
	syncTimeout := fs.Float64("sync-timeout", 120, "seconds")
	recoverTimeout := fs.Float64("recover-timeout", 180, "seconds")
	_ = fs.Parse(args)
	if *marker == "" || *readyFile == "" || *timesFile == "" || *n < 1 || *n > 1000 {
		die("run: -marker, -ready-file, -times-file required; -namespaces in [1, 1000]")
	}
	cs, counter := countingClientset(*kubeconfig, "clientgo-storm-bench/0.36")
	seen := make([]atomic.Int64, *n)
	stop := make(chan struct{})
	var factories []informers.SharedInformerFactory
	var synced []cache.InformerSynced
	for i := 0; i < *n; i++ {
		f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(nsName(*prefix, i)))
		inf := f.Core().V1().Pods().Informer()
		slot := &seen[i]
		check := func(obj interface{}) {
			p, ok := obj.(*corev1.Pod)
			if !ok || p.Annotations[markerAnnotation] != *marker {
				return
			}
			slot.CompareAndSwap(0, time.Now().UnixNano())
		}
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    check,
			UpdateFunc: func(_, o interface{}) { check(o) },
		}); err != nil {
			die("%v", err)
		}
		factories = append(factories, f)
		synced = append(synced, inf.HasSynced)
	}
	start := time.Now()
	for _, f := range factories {
		f.Start(stop)
	}
	syncCtx, cancel := context.WithTimeout(context.Background(), time.Duration(*syncTimeout*float64(time.Second)))
	ok := cache.WaitForCacheSync(syncCtx.Done(), synced...)
	cancel()
	syncS := time.Since(start).Seconds()
	if !ok {
		die("not synced within %.0f s", *syncTimeout)
	}
	if err := os.WriteFile(*readyFile, []byte("ready\n"), 0o644); err != nil {
		die("%v", err)
	}
	deadline := time.Now().Add(time.Duration(*recoverTimeout * float64(time.Second)))
	allSeen := func() bool {
		for i := range seen {
			if seen[i].Load() == 0 {
				return false
			}
		}
		return true
	}
	for !allSeen() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	var begin, ready int64
	for time.Now().Before(deadline) {
		var got bool
		if begin, ready, got = readTimes(*timesFile); got {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	for _, f := range factories {
		f.Shutdown()
	}

	var recover []float64
	var last int64
	for i := range seen {
		t := seen[i].Load()
		if t == 0 {
			continue
		}
		if t > last {
			last = t
		}
		recover = append(recover, float64(t-ready)/1e9)
	}
	until := time.Now().UnixNano()
	if len(recover) == *n {
		until = last
	}
	counts := map[string]int{}
	failed := 0
	perSecond := map[int64]int{}
	for _, e := range counter.entries() {
		if begin == 0 || e.ns < begin || e.ns > until {
			continue
		}
		counts[e.kind]++
		if !e.ok {
			failed++
		}
		perSecond[(e.ns-begin)/1e9]++
	}
	peak := 0
	var secs []int64
	for s, c := range perSecond {
		secs = append(secs, s)
		if c > peak {
			peak = c
		}
	}
	sort.Slice(secs, func(a, b int) bool { return secs[a] < secs[b] })
	ps := make([][2]int64, 0, len(secs))
	for _, s := range secs {
		ps = append(ps, [2]int64{s, int64(perSecond[s])})
	}
	out, _ := json.Marshal(map[string]any{
		"side": "client-go", "watch_list": true, "informers": *n, "sync_s": syncS,
		"recovered": len(recover), "recover_p50_s": quantile(recover, 0.5), "recover_max_s": quantile(recover, 1.0),
		"downtime_s": float64(ready-begin) / 1e9, "lists": counts["list"], "watches": counts["watch"],
		"watch_lists": counts["watchlist"], "failed_requests": failed, "peak_requests_per_s": peak,
		"budget_denials": 0, "per_second": ps,
	})
	fmt.Println(string(out))
	if len(recover) != *n {
		os.Exit(3)
	}
}

// countingClientset: a clientset with client-go's defaults (protobuf for built-in types) whose
// requests are counted.
func countingClientset(kubeconfig, userAgent string) (*kubernetes.Clientset, *countingTransport) {
	cfg := config(kubeconfig)
	cfg.UserAgent = userAgent
	counter := &countingTransport{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		counter.next = rt
		return counter
	})
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		die("%v", err)
	}
	return cs, counter
}

func main() {
	if len(os.Args) < 2 {
		die("usage: clientgo-storm run|load|mark|silent-proxy|watch-pods|create-pod|delete-pod [flags]")
	}
	switch os.Args[1] {
	case "run":
		run(os.Args[2:])
	case "load":
		load(os.Args[2:])
	case "mark":
		mark(os.Args[2:])
	case "silent-proxy":
		silentProxyCmd(os.Args[2:])
	case "watch-pods":
		watchPods(os.Args[2:])
	case "create-pod":
		createPod(os.Args[2:])
	case "delete-pod":
		deletePod(os.Args[2:])
	default:
		die("unknown subcommand %q (run, load, mark, silent-proxy, watch-pods, create-pod, delete-pod)", os.Args[1])
	}
}
