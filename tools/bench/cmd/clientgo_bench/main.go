// clientgo_bench: the client-go peer of kinformer_bench. It decodes the same watch-stream bytes
// (written by `kinformer_bench --write-stream=... --write-memory-stream=...`) through client-go's
// own watch decoding path and stores the Pods in a client-go Indexer, so that the two libraries
// can be compared on one machine in one run (see tools/bench/compare.sh).
//
// Decoding path, as rest.Request.Watch builds it for a typed clientset
// (k8s.io/client-go/rest/request.go, newStreamWatcher):
//
//	negotiator := runtime.NewClientNegotiator(rest.CodecFactoryForGeneratedClient(scheme.Scheme, scheme.Codecs).WithoutConversion(), corev1.SchemeGroupVersion)
//	objectDecoder, streamingSerializer, framer := negotiator.StreamDecoder("application/json", nil)
//	restclientwatch.NewDecoder(streaming.NewDecoder(framer.NewFrameReader(body), streamingSerializer), objectDecoder)
//
// i.e. the JSON framer (framer.NewJSONFramedReader), a metav1.WatchEvent per frame, then the
// embedded object decoded into a *corev1.Pod.
//
// Output: one JSON object per metric on stdout.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	restclientwatch "k8s.io/client-go/rest/watch"
	"k8s.io/client-go/tools/cache"

	"kinformer.dev/bench/internal/cli"
	"kinformer.dev/bench/internal/kube"
	"kinformer.dev/bench/internal/procfs"
	"kinformer.dev/bench/internal/stats"
)

// chunkReader hands out at most n bytes per Read, like HTTP chunks that do not align with events
// (kinformer_bench feeds its decoder 16 KiB pieces).
type chunkReader struct {
	b []byte
	n int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	if len(p) > r.n {
		p = p[:r.n]
	}
	k := copy(p, r.b)
	r.b = r.b[k:]
	return k, nil
}

func (r *chunkReader) Close() error { return nil }

var negotiator = k8sruntime.NewClientNegotiator(
	rest.CodecFactoryForGeneratedClient(scheme.Scheme, scheme.Codecs).WithoutConversion(), corev1.SchemeGroupVersion)

func newWatchDecoder(stream []byte, chunk int) *restclientwatch.Decoder {
	objectDecoder, streamingSerializer, framer, err := negotiator.StreamDecoder("application/json", nil)
	if err != nil {
		fail("negotiate: %v", err)
	}
	frames := framer.NewFrameReader(&chunkReader{b: stream, n: chunk})
	return restclientwatch.NewDecoder(streaming.NewDecoder(frames, streamingSerializer), objectDecoder)
}

// next returns the next Pod of the stream, or nil at its end.
func next(d *restclientwatch.Decoder) *corev1.Pod {
	_, obj, err := d.Decode()
	if err == io.EOF {
		return nil
	}
	if err != nil {
		fail("decode: %v", err)
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		fail("decoded %T, want *corev1.Pod", obj)
	}
	return pod
}

// stripManagedFields is the transform client-go users install with SetTransform to drop
// managedFields before objects are cached (kinformer's codecs never keep them).
var stripManagedFields = kube.StripManagedFields

func newIndexer() cache.Indexer {
	return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}

// store does what an informer's processDeltas does with a Sync/Added/Updated delta: transform,
// then Update if the key exists, else Add.
func store(idx cache.Indexer, pod *corev1.Pod) {
	obj, _ := stripManagedFields(pod)
	if _, exists, err := idx.Get(obj); err == nil && exists {
		if err := idx.Update(obj); err != nil {
			fail("update: %v", err)
		}
	} else if err := idx.Add(obj); err != nil {
		fail("add: %v", err)
	}
}

// cpuTime: the process's CPU time (procfs.CPUTime: user + system, all threads).
var cpuTime = procfs.CPUTime

type pass struct{ wall, cpu time.Duration }

type rate struct {
	Metric               string  `json:"metric"`
	Events               int     `json:"events"`
	Bytes                int     `json:"bytes"`
	Passes               int     `json:"passes"`
	EventsPerSecCPU      float64 `json:"events_per_sec_cpu_median"`
	EventsPerSecCPUBest  float64 `json:"events_per_sec_cpu_best"`
	EventsPerSecWall     float64 `json:"events_per_sec_wall_median"`
	EventsPerSecWallBest float64 `json:"events_per_sec_wall_best"`
	BytesPerSecCPU       float64 `json:"bytes_per_sec_cpu_median"`
	BytesPerSecWall      float64 `json:"bytes_per_sec_wall_median"`
}

// measure runs one untimed warm-up pass, then `passes` timed ones. CPU time is the process's
// (user + system, all threads), so the garbage collector's background work is counted, as the
// C++ side's frees are counted in its thread CPU time.
func measure(name string, events, nbytes, passes int, run func() int) rate {
	if got := run(); got != events {
		fail("%s: %d events, want %d", name, got, events)
	}
	var walls, cpus []time.Duration
	for i := 0; i < passes; i++ {
		runtime.GC()
		w0, c0 := time.Now(), cpuTime()
		got := run()
		walls = append(walls, time.Since(w0))
		cpus = append(cpus, cpuTime()-c0)
		if got != events {
			fail("%s: %d events, want %d", name, got, events)
		}
	}
	per := func(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }
	return rate{
		Metric: name, Events: events, Bytes: nbytes, Passes: passes,
		EventsPerSecCPU: per(events, stats.Median(cpus)), EventsPerSecCPUBest: per(events, stats.Min(cpus)),
		EventsPerSecWall: per(events, stats.Median(walls)), EventsPerSecWallBest: per(events, stats.Min(walls)),
		BytesPerSecCPU: per(nbytes, stats.Median(cpus)), BytesPerSecWall: per(nbytes, stats.Median(walls)),
	}
}

type memory struct {
	Metric      string  `json:"metric"`
	Pods        int     `json:"pods"`
	BytesPerPod float64 `json:"bytes_per_pod"`
}

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// memoryPerPod decodes the distinct Pods of the memory stream (managedFields stripped) and holds
// them either in an Indexer with a namespace index (as an informer does) or in a plain slice (the
// counterpart of kinformer_bench's BM_MemoryPerPod). The decoder, the indexer and the first Pod
// exist before the baseline, so the delta is the other Pods alone; divided by their number.
func memoryPerPod(stream []byte, chunk int, inIndexer bool) memory {
	d := newWatchDecoder(stream, chunk)
	idx := newIndexer()
	held := make([]*corev1.Pod, 0, bytes.Count(stream, []byte{'\n'}))
	keep := func(p *corev1.Pod) {
		if inIndexer {
			store(idx, p)
		} else {
			stripManagedFields(p)
			held = append(held, p)
		}
	}
	keep(next(d))
	before := heapAlloc()
	n := 0
	for p := next(d); p != nil; p = next(d) {
		keep(p)
		n++
	}
	after := heapAlloc()
	if inIndexer && len(idx.ListKeys()) != n+1 {
		fail("indexer holds %d Pods, want %d", len(idx.ListKeys()), n+1)
	}
	runtime.KeepAlive(d)
	runtime.KeepAlive(idx)
	runtime.KeepAlive(held)
	name := "clientgo_memory_per_pod_slice"
	if inIndexer {
		name = "clientgo_memory_per_pod_indexer"
	}
	return memory{Metric: name, Pods: n, BytesPerPod: float64(int64(after)-int64(before)) / float64(n)}
}

var fail = cli.Die

func main() {
	cli.Name, cli.ExitCode = "clientgo_bench", 1
	streamPath := flag.String("stream", "", "watch stream (NDJSON) from kinformer_bench --write-stream")
	memoryPath := flag.String("memory-stream", "", "distinct-Pod stream from kinformer_bench --write-memory-stream")
	passes := flag.Int("passes", 7, "timed passes per throughput metric (after one warm-up pass)")
	chunk := flag.Int("chunk", 16*1024, "bytes per Read handed to the framer")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fail("%v", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fail("%v", err)
		}
		defer pprof.StopCPUProfile()
	}
	if *streamPath == "" || *memoryPath == "" {
		fail("need -stream and -memory-stream")
	}
	stream, err := os.ReadFile(*streamPath)
	if err != nil {
		fail("%v", err)
	}
	memStream, err := os.ReadFile(*memoryPath)
	if err != nil {
		fail("%v", err)
	}
	events := bytes.Count(stream, []byte{'\n'})
	out := json.NewEncoder(os.Stdout)
	emit := func(v interface{}) {
		if err := out.Encode(v); err != nil {
			fail("%v", err)
		}
	}

	// Memory first, on a fresh heap.
	emit(memoryPerPod(memStream, *chunk, false))
	emit(memoryPerPod(memStream, *chunk, true))

	// Decode only: bytes -> *corev1.Pod, dropped at once.
	emit(measure("clientgo_decode", events, len(stream), *passes, func() int {
		d := newWatchDecoder(stream, *chunk)
		n := 0
		for p := next(d); p != nil; p = next(d) {
			n++
		}
		return n
	}))

	// Ingest: decode + strip managedFields + Indexer Get/Update-or-Add. One indexer for all passes
	// (5,000 keys, each updated 4 times per pass), as BM_IngestPods keeps one Store.
	idx := newIndexer()
	emit(measure("clientgo_ingest", events, len(stream), *passes, func() int {
		d := newWatchDecoder(stream, *chunk)
		n := 0
		for p := next(d); p != nil; p = next(d) {
			store(idx, p)
			n++
		}
		return n
	}))
}
