// clientgo-sync: the client-go peer of kinformer_sync_bench (tools/bench/sync_bench.cc) for the
// side-by-side sync benchmark (tools/bench/sync.sh).
//
// One run: a SharedInformerFactory (client-go v0.36.3) with Pod, Secret and EndpointSlice
// informers (all namespaces unless -namespace), a transform that strips managedFields, one
// counting handler per informer, started at once. It measures, as the C++ side does:
//   - sync: from factory.Start until every informer HasSynced and its handler has counted the
//     expected adds (-pods, -secrets, -slices: the cluster's totals, from the loader);
//   - peak RSS: VmHWM of /proc/self/status right after the sync;
//   - steady RSS: VmRSS after the sync settled: -settle-ms/2, runtime.GC() and
//     debug.FreeOSMemory(), -settle-ms/2 (the C++ side calls malloc_trim(0) at that point);
//   - baseline RSS: VmRSS before factory.Start, after the same GC + FreeOSMemory;
//   - bytes received: TCP payload bytes (TCP_INFO tcpi_bytes_received) summed over the
//     process's TCP sockets open at sync time (the C++ side measures the same way), and the
//     response body bytes seen by a counting RoundTripper (rest.Config.WrapTransport), after
//     the transport's transparent gzip decoding.
//
// -encoding protobuf|json sets rest.Config ContentType (and AcceptContentTypes) explicitly.
// -list-mode watchlist|list: the WatchListClient feature gate, which client-go reads from the
// environment variable KUBE_FEATURE_WatchListClient; sync.sh sets it (true or false), and this
// program sets it too when unset, before client-go reads its gates, and reports the gate's value.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"kinformer.dev/bench/internal/cli"
	"kinformer.dev/bench/internal/kube"
	"kinformer.dev/bench/internal/procfs"
)

type tracked struct {
	name     string
	want     int64
	inf      cache.SharedIndexInformer
	adds     atomic.Int64
	syncedNS atomic.Int64 // time since start when synced and counted; 0 = not yet
}

var die = cli.Die

func main() {
	cli.Name, cli.ExitCode = "clientgo-sync", 2
	kubeconfig := cli.Kubeconfig(nil)
	encoding := flag.String("encoding", "protobuf", "protobuf or json")
	listMode := flag.String("list-mode", "watchlist", "watchlist or list (the WatchListClient gate)")
	resources := flag.String("resources", "pods,secrets,endpointslices", "informers to run")
	namespace := flag.String("namespace", "", "namespace of the informers (empty: all)")
	pods := flag.Int64("pods", 0, "Pods expected")
	secrets := flag.Int64("secrets", 0, "Secrets expected")
	slices := flag.Int64("slices", 0, "EndpointSlices expected")
	syncTimeout := flag.Float64("sync-timeout", 300, "give up on the sync after this long (s)")
	settleMS := flag.Int("settle-ms", 1000, "after the sync: wait, GC, wait, then read the steady RSS")
	flag.Parse()
	if *encoding != "protobuf" && *encoding != "json" {
		die("-encoding must be protobuf or json")
	}
	if *listMode != "watchlist" && *listMode != "list" {
		die("-list-mode must be watchlist or list")
	}
	if _, set := os.LookupEnv("KUBE_FEATURE_WatchListClient"); !set {
		_ = os.Setenv("KUBE_FEATURE_WatchListClient", strconv.FormatBool(*listMode == "watchlist"))
	}
	watchListGate := clientfeatures.FeatureGates().Enabled(clientfeatures.WatchListClient)
	if watchListGate != (*listMode == "watchlist") {
		die("-list-mode %s but the WatchListClient gate is %v (KUBE_FEATURE_WatchListClient=%s)",
			*listMode, watchListGate, os.Getenv("KUBE_FEATURE_WatchListClient"))
	}

	cfg, err := kube.Config(*kubeconfig, kube.Encoding(*encoding))
	if err != nil {
		die("%v", err)
	}
	cfg.UserAgent = "clientgo-sync-bench/0.36"
	counter := kube.Wrap(cfg)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		die("%v", err)
	}

	opts := []informers.SharedInformerOption{informers.WithTransform(kube.StripManagedFields)}
	if *namespace != "" {
		opts = append(opts, informers.WithNamespace(*namespace))
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, opts...)
	var all []*tracked
	for _, r := range strings.Split(*resources, ",") {
		t := &tracked{name: r}
		switch r {
		case "pods":
			t.want, t.inf = *pods, factory.Core().V1().Pods().Informer()
		case "secrets":
			t.want, t.inf = *secrets, factory.Core().V1().Secrets().Informer()
		case "endpointslices":
			t.want, t.inf = *slices, factory.Discovery().V1().EndpointSlices().Informer()
		default:
			die("unknown resource %q (pods, secrets, endpointslices)", r)
		}
		_, err := t.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(interface{}) { t.adds.Add(1) },
		})
		if err != nil {
			die("AddEventHandler: %v", err)
		}
		all = append(all, t)
	}

	runtime.GC()
	debug.FreeOSMemory()
	baselineKB := procfs.Status("VmRSS")
	ctx, cancel := context.WithCancel(context.Background())
	t0 := time.Now()
	factory.Start(ctx.Done())
	deadline := t0.Add(time.Duration(*syncTimeout * float64(time.Second)))
	synced := false
	for time.Now().Before(deadline) {
		done := true
		for _, t := range all {
			if t.syncedNS.Load() != 0 {
				continue
			}
			if t.adds.Load() >= t.want && t.inf.HasSynced() {
				t.syncedNS.Store(time.Since(t0).Nanoseconds())
			} else {
				done = false
			}
		}
		if done {
			synced = true
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	syncS := time.Since(t0).Seconds()
	if !synced {
		syncS = -1
	}
	peakKB := procfs.Status("VmHWM")
	tcpBytes, tcpSockets := procfs.TCPBytesReceived()
	body := counter.BodyBytes()

	settle := time.Duration(*settleMS) * time.Millisecond
	time.Sleep(settle / 2)
	runtime.GC()
	debug.FreeOSMemory()
	time.Sleep(settle / 2)
	steadyKB := procfs.Status("VmRSS")
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)

	perResource := map[string]any{}
	secretData := int64(0)
	for _, t := range all {
		objects := len(t.inf.GetStore().ListKeys())
		if t.name == "secrets" {
			for _, o := range t.inf.GetStore().List() {
				if s, ok := o.(*corev1.Secret); ok {
					for _, v := range s.Data {
						secretData += int64(len(v))
					}
				}
			}
		}
		perResource[t.name] = map[string]any{
			"expected": t.want, "objects": objects, "adds": t.adds.Load(),
			"sync_s": float64(t.syncedNS.Load()) * 1e-9,
		}
	}

	cancel()
	if !kube.Shutdown(factory, 10*time.Second) {
		fmt.Fprintln(os.Stderr, "clientgo-sync: factory.Shutdown did not return within 10 s")
	}

	var lists, watches, others int
	for _, r := range counter.Requests() {
		switch {
		case r.Kind != "list":
			watches++
		case r.Collection:
			lists++
		default:
			others++
		}
	}
	total := int64(0)
	for _, t := range all {
		total += t.want
	}
	out := map[string]any{
		"side": "client-go", "encoding": *encoding, "list_mode": *listMode, "resources": *resources,
		"namespace": *namespace, "watch_list_gate": watchListGate,
		"objects": total, "per_resource": perResource, "synced": synced, "sync_s": syncS,
		"baseline_rss_kb": baselineKB, "peak_rss_kb": peakKB, "steady_rss_kb": steadyKB,
		"heap_alloc_steady_bytes": ms.HeapAlloc,
		"tcp_bytes_received":      tcpBytes, "tcp_sockets": tcpSockets, "body_bytes": body,
		"list_requests": lists, "watch_requests": watches, "other_requests": others,
		"secret_data_bytes": secretData, "go": runtime.Version(), "gomaxprocs": runtime.GOMAXPROCS(0),
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
	if !synced {
		os.Exit(1)
	}
}
