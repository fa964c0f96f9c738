// clientgo-fanout: the client-go peer of kinformer_fanout_bench (tools/bench/fanout_bench.cc).
//
// One run: a SharedInformerFactory (client-go v0.36 defaults, WatchList included, with protobuf
// set explicitly as kube components do) with one Pod informer on -namespace and N counting
// handlers added before Start. It measures, exactly as the C++ side does:
//   - sync: from factory.Start until every (non-stuck) handler has counted -pods adds;
//   - threads: /proc/self/status Threads (OS threads);
//   - after writing -ready-file and seeing the first update (the driver starts the patcher then)
//     and -warmup-seconds: delivered notifications, CPU and delivery latency over -window-seconds.
//
// Latency: the informer's transform (called once per object when the reflector queues it, just
// before the store update) strips managedFields and writes the receipt time (monotonic ns since
// process start) into the annotation bench.kinformer.dev/recv; each handler's update callback
// subtracts it from its own monotonic clock. The patcher's wall clock in
// bench.kinformer.dev/sent gives the end-to-end latency.
//
// With -stuck 1, handler 0 blocks in its first callback until the run ends.
//
// With -source synthetic, the watch events come from this process at -rate (see synthetic.go);
// the list is the real server's.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"kinformer.dev/bench/internal/cli"
	"kinformer.dev/bench/internal/kube"
	"kinformer.dev/bench/internal/procfs"
	"kinformer.dev/bench/internal/stats"
)

const (
	recvAnnotation = "bench.kinformer.dev/recv"
	sentAnnotation = "bench.kinformer.dev/sent"
)

var processStart = time.Now()

func monoNS() int64 { return time.Since(processStart).Nanoseconds() }

// counter: one handler's counts; atomics so that main can read them while the handler's
// goroutine writes them. Histograms are read only after shutdown.
type counter struct {
	adds, updates, deletes atomic.Uint64
	stuck, blockedOnce     bool
	latency, endToEnd      stats.Histogram
	_                      [64]byte
}

func (c *counter) total() uint64 { return c.adds.Load() + c.updates.Load() + c.deletes.Load() }

func annotationNS(p *corev1.Pod, key string) (int64, bool) {
	v, ok := p.Annotations[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

var seconds = cli.Seconds

func main() {
	cli.Name, cli.ExitCode = "clientgo-fanout", 2
	kubeconfig := cli.Kubeconfig(nil)
	namespace := flag.String("namespace", "fanout-bench", "namespace of the Pods")
	pods := flag.Int("pods", 5000, "Pods expected in the namespace")
	handlers := flag.Int("handlers", 1, "counting handlers")
	stuck := flag.Int("stuck", 0, "1: handler 0 blocks in its first callback")
	warmup := flag.Float64("warmup-seconds", 1, "after the first update, before the window")
	window := flag.Float64("window-seconds", 8, "measurement window")
	syncTimeout := flag.Float64("sync-timeout", 180, "give up on the sync after this long")
	eventsTimeout := flag.Float64("events-timeout", 30, "give up waiting for the first update after this long")
	readyFile := flag.String("ready-file", "", "written once synced")
	noEvents := flag.Bool("no-events", false, "only measure the sync")
	source := flag.String("source", "server", "server: watch the server; synthetic: paced events from this process (synthetic.go)")
	rateAsked := flag.Float64("rate", 5000, "-source synthetic: events per second")
	flag.Parse()
	if (*source != "server" && *source != "synthetic") || !(*rateAsked > 0 && *rateAsked <= 1e6) {
		cli.Die("bad -source/-rate")
	}
	if *handlers < 1 || *handlers > 100000 || (*stuck != 0 && *handlers < 2) || *window <= 0 || *window > 600 {
		cli.Die("bad -handlers/-stuck/-window-seconds")
	}

	cfg, err := kube.Config(*kubeconfig, kube.Protobuf)
	if err != nil {
		cli.Die("%v", err)
	}
	cfg.UserAgent = "clientgo-fanout-bench/0.36"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		cli.Die("%v", err)
	}

	transform := func(obj interface{}) (interface{}, error) {
		if p, ok := obj.(*corev1.Pod); ok {
			now := monoNS()
			p.ManagedFields = nil
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[recvAnnotation] = strconv.FormatInt(now, 10)
		}
		return obj, nil
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0,
		informers.WithNamespace(*namespace), informers.WithTransform(transform))
	var synthetic *syntheticSource
	var inf cache.SharedIndexInformer
	if *source == "synthetic" {
		synthetic = newSyntheticSource(*rateAsked)
		inf = factory.InformerFor(&corev1.Pod{}, synthetic.podInformer(*namespace))
	} else {
		inf = factory.Core().V1().Pods().Informer()
	}

	countedHandlers := int64(*handlers)
	if *stuck != 0 {
		countedHandlers--
	}
	var syncedHandlers atomic.Int64
	var syncDone atomic.Int64
	var firstUpdate, recording atomic.Bool
	release := make(chan struct{})
	blockIfStuck := func(c *counter) {
		if !c.stuck || c.blockedOnce {
			return
		}
		c.blockedOnce = true
		select {
		case <-release:
		case <-time.After(10 * time.Minute):
		}
	}
	counters := make([]*counter, *handlers)
	for i := range counters {
		c := &counter{stuck: *stuck != 0 && i == 0}
		counters[i] = c
		_, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(obj interface{}, _ bool) {
				blockIfStuck(c)
				n := c.adds.Add(1)
				if n == uint64(*pods) && !c.stuck {
					if syncedHandlers.Add(1) == countedHandlers {
						syncDone.Store(monoNS())
					}
				}
			},
			UpdateFunc: func(_, newObj interface{}) {
				blockIfStuck(c)
				c.updates.Add(1)
				if !firstUpdate.Load() {
					firstUpdate.Store(true)
				}
				if !recording.Load() {
					return
				}
				p, ok := newObj.(*corev1.Pod)
				if !ok {
					return
				}
				if recv, ok := annotationNS(p, recvAnnotation); ok {
					c.latency.Add(monoNS() - recv)
				}
				if sent, ok := annotationNS(p, sentAnnotation); ok {
					c.endToEnd.Add(time.Now().UnixNano() - sent)
				}
			},
			DeleteFunc: func(interface{}) {
				blockIfStuck(c)
				c.deletes.Add(1)
			},
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "clientgo-fanout: AddEventHandler:", err)
			os.Exit(1)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	threadsMax := procfs.Threads()
	t0 := monoNS()
	factory.Start(ctx.Done())
	syncDeadline := time.Now().Add(seconds(*syncTimeout))
	synced := true
	for syncDone.Load() == 0 {
		if time.Now().After(syncDeadline) {
			synced = false
			break
		}
		time.Sleep(5 * time.Millisecond)
		threadsMax = max(threadsMax, procfs.Threads())
	}
	syncS := -1.0
	if synced {
		syncS = float64(syncDone.Load()-t0) * 1e-9
	}
	threadsSynced := procfs.Threads()
	threadsMax = max(threadsMax, threadsSynced)
	storeSize := len(inf.GetStore().ListKeys())
	peakRSSSyncMB := procfs.Status("VmHWM") / 1024
	if *readyFile != "" {
		_ = os.WriteFile(*readyFile, []byte("ready\n"), 0o644)
	}
	if synthetic != nil && synced && !*noEvents {
		synthetic.start(seconds(*eventsTimeout + *warmup + *window + 10))
	}

	eventsSeen := false
	var windowS, cpuWindowS float64
	var delivered, sourceEvents uint64
	if synced && !*noEvents {
		deadline := time.Now().Add(seconds(*eventsTimeout))
		for !firstUpdate.Load() && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		eventsSeen = firstUpdate.Load()
		if eventsSeen {
			time.Sleep(seconds(*warmup))
			sum := func() uint64 {
				var t uint64
				for _, c := range counters {
					if !c.stuck {
						t += c.total()
					}
				}
				return t
			}
			recording.Store(true)
			n0 := sum()
			var e0 uint64
			if synthetic != nil {
				e0 = synthetic.emitted.Load()
			}
			cpu0 := procfs.CPUSeconds()
			w0 := time.Now()
			wEnd := w0.Add(seconds(*window))
			for time.Now().Before(wEnd) {
				time.Sleep(50 * time.Millisecond)
				threadsMax = max(threadsMax, procfs.Threads())
			}
			n1 := sum()
			if synthetic != nil {
				sourceEvents = synthetic.emitted.Load() - e0
			}
			cpuWindowS = procfs.CPUSeconds() - cpu0
			windowS = time.Since(w0).Seconds()
			recording.Store(false)
			delivered = n1 - n0
		}
	}
	if synthetic != nil {
		synthetic.finish()
	}
	threadsEnd := procfs.Threads()
	threadsMax = max(threadsMax, threadsEnd)

	close(release)
	cancel()
	if !kube.Shutdown(factory, 10*time.Second) {
		fmt.Fprintln(os.Stderr, "clientgo-fanout: factory.Shutdown did not return within 10 s")
	}

	var latency, endToEnd stats.Histogram
	for _, c := range counters {
		if c.stuck {
			continue
		}
		latency.Merge(&c.latency)
		endToEnd.Merge(&c.endToEnd)
	}
	rate := func(n float64) float64 {
		if windowS <= 0 {
			return 0
		}
		return n / windowS
	}
	initialRate := 0.0
	if syncS > 0 {
		initialRate = float64(countedHandlers) * float64(*pods) / syncS
	}
	cpuPer := 0.0
	if delivered > 0 {
		cpuPer = cpuWindowS * 1e6 / float64(delivered)
	}
	out := map[string]any{
		"side": "client-go", "handlers": *handlers, "stuck": *stuck, "pods": *pods, "namespace": *namespace,
		"synced": synced, "sync_s": syncS, "store_size": storeSize, "peak_rss_sync_mb": peakRSSSyncMB, "initial_notifications_per_s": initialRate,
		"threads_synced": threadsSynced, "threads_max": threadsMax, "threads_end": threadsEnd,
		"events_seen": eventsSeen, "window_s": windowS, "delivered": delivered,
		"delivered_per_s": rate(float64(delivered)), "events_per_s_per_handler": rate(float64(delivered)) / float64(countedHandlers),
		"cpu_window_s": cpuWindowS, "cpu_us_per_notification": cpuPer,
		"latency_samples": latency.Total,
		"latency_p50_us":  float64(latency.Quantile(0.50)) / 1e3,
		"latency_p99_us":  float64(latency.Quantile(0.99)) / 1e3,
		"latency_max_us":  float64(latency.Quantile(1.0)) / 1e3,
		"e2e_p50_us":      float64(endToEnd.Quantile(0.50)) / 1e3,
		"e2e_p99_us":      float64(endToEnd.Quantile(0.99)) / 1e3,
		"source":          *source,
	}
	if synthetic != nil {
		out["source_rate_asked"] = *rateAsked
		out["source_templates"] = synthetic.templateCount()
		out["source_events"] = sourceEvents
		out["source_events_per_s"] = rate(float64(sourceEvents))
	} else {
		out["source_rate_asked"], out["source_templates"], out["source_events"], out["source_events_per_s"] = 0, 0, 0, 0
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
	if !synced {
		os.Exit(1)
	}
}
