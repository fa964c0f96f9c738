// clientgo-workqueue: the client-go peer of kinformer_workqueue_bench
// (tools/bench/workqueue_bench.cc) for the work-queue benchmark (tools/bench/workqueue.sh).
//
// The queue is client-go v0.36.3's rate-limiting work queue as controllers make it:
// workqueue.NewTypedRateLimitingQueueWithConfig[string] with DefaultTypedControllerRateLimiter and
// no name (no metrics), as the C++ side runs controller::WorkQueue without a registry. One run:
//  1. builds -keys distinct keys "bench/object-NNNNNNN" (before any measurement);
//  2. memory: with no worker, adds every key to a fresh queue and reads HeapAlloc (after
//     runtime.GC()) and VmRSS before and after (before: also debug.FreeOSMemory()); bytes per
//     queued key = the heap delta / keys;
//  3. throughput, -rounds times: a fresh queue, -workers goroutines looping Get(), Forget(),
//     Done(); one producer adds every key; the round's time runs from just before the first Add
//     to the Done of the last key; keys/s per round;
//  4. prints one JSON object on stdout, with the same fields as the C++ side.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/util/workqueue"

	"kinformer.dev/bench/internal/procfs"
	"kinformer.dev/bench/internal/stats"
)

func newQueue() workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{})
}

// round is one throughput round: keys/s.
func round(keys []string, workers int) float64 {
	q := newQueue()
	total := int64(len(keys))
	var processed atomic.Int64
	var end time.Time
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				key, shutdown := q.Get()
				if shutdown {
					return
				}
				q.Forget(key)
				q.Done(key)
				if processed.Add(1) == total {
					end = time.Now()
					close(done)
				}
			}
		}()
	}
	start := time.Now()
	for _, k := range keys {
		q.Add(k)
	}
	<-done
	q.ShutDown()
	wg.Wait()
	return float64(total) / end.Sub(start).Seconds()
}

func main() {
	n := flag.Int("keys", 100000, "distinct keys")
	workers := flag.Int("workers", 8, "worker goroutines")
	rounds := flag.Int("rounds", 5, "throughput rounds")
	flag.Parse()
	if *n < 1 || *workers < 1 || *rounds < 1 {
		fmt.Fprintln(os.Stderr, "usage: clientgo-workqueue [-keys N] [-workers W] [-rounds R]")
		os.Exit(2)
	}
	keys := make([]string, *n)
	for i := range keys {
		keys[i] = fmt.Sprintf("bench/object-%07d", i)
	}

	var ms runtime.MemStats
	runtime.GC()
	debug.FreeOSMemory()
	runtime.ReadMemStats(&ms)
	heapBefore := ms.HeapAlloc
	rssBefore := procfs.Status("VmRSS")
	q := newQueue()
	for _, k := range keys {
		q.Add(k)
	}
	if q.Len() != *n {
		fmt.Fprintf(os.Stderr, "queued %d of %d keys\n", q.Len(), *n)
		os.Exit(1)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heapPerKey := float64(int64(ms.HeapAlloc)-int64(heapBefore)) / float64(*n)
	rssPerKey := float64(procfs.Status("VmRSS")-rssBefore) * 1024 / float64(*n)
	runtime.KeepAlive(q)
	q.ShutDown()

	rates := make([]float64, 0, *rounds)
	for r := 0; r < *rounds; r++ {
		rates = append(rates, round(keys, *workers))
	}
	out := map[string]any{
		"side":                      "client-go",
		"keys":                      *n,
		"workers":                   *workers,
		"rounds":                    rates,
		"keys_per_s_median":         stats.Quantile(rates, 0.5),
		"heap_bytes_per_queued_key": heapPerKey,
		"rss_bytes_per_queued_key":  rssPerKey,
		"vmhwm_kb":                  procfs.Status("VmHWM"),
		"cpu_s":                     procfs.CPUSeconds(),
		"gomaxprocs":                runtime.GOMAXPROCS(0),
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		os.Exit(1)
	}
}
