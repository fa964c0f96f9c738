// clientgo-storm: the reconnect-storm benchmark's client-go side, and its loader.
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
//	clientgo-storm clusters -clusters N -namespace NS -ready-file F
//	    threads.sh's client-go peer of kwatch with N remote clusters (clusters.go).
//
// load and mark refuse a server that is not on a loopback address. Every wait is bounded.
// silent-proxy, watch-pods, create-pod and delete-pod (silent.sh's) are described in silent.go.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
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
	"k8s.io/client-go/tools/cache"

	"kinformer.dev/bench/internal/cli"
	"kinformer.dev/bench/internal/kube"
	"kinformer.dev/bench/internal/par"
	"kinformer.dev/bench/internal/stats"
)

const markerAnnotation = "bench.kinformer.dev/storm-marker"

var die = cli.Die

// adminClient: the loader's clientset (kube.WriterClient: loopback only, no rate limit).
func adminClient(kubeconfig string) *kubernetes.Clientset {
	cs, err := kube.WriterClient(kubeconfig, "clientgo-storm-loader")
	if err != nil {
		die("%v", err)
	}
	return cs
}

func nsName(prefix string, i int) string { return fmt.Sprintf("%s%d", prefix, i) }

func load(args []string) {
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	kubeconfig := cli.Kubeconfig(fs)
	prefix := fs.String("prefix", "storm-", "namespace prefix")
	n := fs.Int("namespaces", 50, "namespaces")
	pods := fs.Int("pods", 3, "Pods per namespace")
	_ = fs.Parse(args)
	cs := adminClient(*kubeconfig)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// One namespace and its Pods per call, 16 at a time.
	failed := par.Each(*n, 16, func(i int) error {
		ns := nsName(*prefix, i)
		if err := kube.EnsureNamespace(ctx, cs, ns); err != nil {
			return fmt.Errorf("load: namespace %s: %v", ns, err)
		}
		var errs []error
		for p := 0; p < *pods; p++ {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", p), Namespace: ns, Labels: map[string]string{"app": "storm"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
			}
			_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				errs = append(errs, fmt.Errorf("load: pod %s/%s: %v", ns, pod.Name, err))
			}
		}
		return errors.Join(errs...)
	})
	if failed > 0 {
		os.Exit(1)
	}
}

func mark(args []string) {
	fs := flag.NewFlagSet("mark", flag.ExitOnError)
	kubeconfig := cli.Kubeconfig(fs)
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

func run(args []string) {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	kubeconfig := cli.Kubeconfig(fs)
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
	for _, e := range counter.Requests() {
		if begin == 0 || e.UnixNS < begin || e.UnixNS > until {
			continue
		}
		counts[e.Kind]++
		if !e.OK {
			failed++
		}
		perSecond[(e.UnixNS-begin)/1e9]++
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
		"recovered": len(recover), "recover_p50_s": stats.Quantile(recover, 0.5), "recover_max_s": stats.Quantile(recover, 1.0),
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
func countingClientset(kubeconfig, userAgent string) (*kubernetes.Clientset, *kube.Counter) {
	cfg, err := kube.Config(kubeconfig, kube.Protobuf)
	if err != nil {
		die("%v", err)
	}
	cfg.UserAgent = userAgent
	counter := kube.Wrap(cfg)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		die("%v", err)
	}
	return cs, counter
}

func main() {
	cli.Name, cli.ExitCode = "clientgo-storm", 2
	if len(os.Args) < 2 {
		die("usage: clientgo-storm run|clusters|load|mark|silent-proxy|watch-pods|create-pod|delete-pod [flags]")
	}
	switch os.Args[1] {
	case "run":
		run(os.Args[2:])
	case "clusters":
		clusters(os.Args[2:])
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
