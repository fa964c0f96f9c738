package main

// The synthetic steady event source (-source synthetic), the peer of SyntheticSource in
// fanout_bench.cc: list from the real server (protobuf, unchanged), watch from this process.
//
// Once main has synced it calls start(); from then on every watch the reflector opens gets
// `Modified` events paced to -rate on an absolute schedule (event i at start + i/rate, shared
// across re-watches; a late consumer gets the overdue events at once, so the asked rate is not
// lowered silently, and main reports the achieved rate). Event i is a DeepCopy of listed Pod
// i mod N with resourceVersion list RV + i + 1, label bench-seq = i and annotation
// bench.kinformer.dev/sent = wall clock, as the patcher writes them. The receipt stamp is the
// transform's, unchanged. After finish() (main's window is over) a watch that was open ends
// (its channel is closed, as a server's timeout would); a watch opened after that stays idle
// until Stop.
//
// The watcher is our own watch.Interface with an UNBUFFERED result channel, not
// watch.NewFakeWithChanSize (its Stop closes the result channel, so a send from the pacing
// goroutine could panic) nor watch.NewRaceFreeFake (it panics when its buffer is full, which a
// slow consumer at 5,000/s would hit). Unbuffered, like client-go's StreamWatcher and like the
// C++ stream's pull-based next(): an event counts as emitted when the reflector takes it, and
// no queue builds up between the source and the reflector on either side. The copy is made on
// the pacing goroutine (a watch.Interface is a channel; the real StreamWatcher decodes on its
// own goroutine too), while the C++ side makes it in next() on the reflector thread.
//
// WatchList: in client-go v0.36 the reflector uses WatchList when the WatchListClient feature
// gate is on (the default) unless its ListerWatcher implements IsWatchListSemanticsUnSupported()
// returning true (util/watchlist.DoesClientNotSupportWatchListSemantics, checked in
// NewReflectorWithOptions). The synthetic watch does not implement sendInitialEvents, so the
// informer's ListerWatcher is wrapped with cache.ToListWatcherWithWatchListSemantics(lw,
// noWatchList{}) whose method returns true: this informer lists with LIST (through the pager),
// everything else stays client-go's default. The gate itself is untouched, so the server mode
// keeps WatchList.

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// noWatchList tells the reflector that this ListerWatcher does not support WatchList.
type noWatchList struct{}

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

type syntheticSource struct {
	rate float64

	mu        sync.Mutex
	lists     []*corev1.PodList // the pages of the last complete list
	paging    []*corev1.PodList
	pagingRV  uint64
	baseRV    uint64
	templates []*corev1.Pod // DeepCopies of the listed Pods, made by start()
	next      uint64        // schedule index, shared across re-watches
	t0, end   time.Time

	started, finished     chan struct{}
	startOnce, finishOnce sync.Once
	emitted               atomic.Uint64
}

func newSyntheticSource(rate float64) *syntheticSource {
	return &syntheticSource{rate: rate, started: make(chan struct{}), finished: make(chan struct{})}
}

func parseRV(s string) uint64 {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// onListPage records every page the real list returned.
func (s *syntheticSource) onListPage(opts metav1.ListOptions, l *corev1.PodList) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if opts.Continue == "" {
		s.paging, s.pagingRV = nil, 0
	}
	s.paging = append(s.paging, l)
	s.pagingRV = max(s.pagingRV, parseRV(l.ResourceVersion))
	for i := range l.Items {
		s.pagingRV = max(s.pagingRV, parseRV(l.Items[i].ResourceVersion))
	}
	if l.Continue == "" {
		s.lists, s.baseRV = s.paging, s.pagingRV
		s.paging = nil
	}
}

// start copies the listed Pods (outside sync and window; the informer no longer touches them)
// and starts the schedule; events stop at the latest after maxRun (a bound: main calls finish).
func (s *syntheticSource) start(maxRun time.Duration) {
	s.startOnce.Do(func() {
		s.mu.Lock()
		for _, l := range s.lists {
			for i := range l.Items {
				s.templates = append(s.templates, l.Items[i].DeepCopy())
			}
		}
		s.t0 = time.Now()
		s.end = s.t0.Add(maxRun)
		s.mu.Unlock()
		close(s.started)
	})
}

func (s *syntheticSource) finish() { s.finishOnce.Do(func() { close(s.finished) }) }

func (s *syntheticSource) templateCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.templates)
}

type syntheticWatcher struct {
	result   chan watch.Event
	stop     chan struct{}
	stopOnce sync.Once
}

func (w *syntheticWatcher) Stop()                          { w.stopOnce.Do(func() { close(w.stop) }) }
func (w *syntheticWatcher) ResultChan() <-chan watch.Event { return w.result }

func (s *syntheticSource) watch() watch.Interface {
	w := &syntheticWatcher{result: make(chan watch.Event), stop: make(chan struct{})}
	afterRun := false
	select {
	case <-s.finished:
		afterRun = true
	default:
	}
	go s.run(w, afterRun)
	return w
}

func (s *syntheticSource) run(w *syntheticWatcher, afterRun bool) {
	defer close(w.result)
	if afterRun { // the run is over: idle until the reflector stops the watch
		<-w.stop
		return
	}
	select {
	case <-s.started:
	case <-w.stop:
		return
	case <-s.finished:
		return
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s.mu.Lock()
		if len(s.templates) == 0 {
			s.mu.Unlock()
			s.finish()
			return
		}
		i := s.next
		due := s.t0.Add(time.Duration(float64(i) / s.rate * float64(time.Second)))
		if !due.Before(s.end) {
			s.mu.Unlock()
			s.finish()
			return
		}
		s.next++
		tmpl := s.templates[i%uint64(len(s.templates))]
		rv := s.baseRV + i + 1
		s.mu.Unlock()
		// Absolute schedule: no wait at all when the consumer is behind.
		if d := time.Until(due); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-w.stop:
				return
			case <-s.finished:
				return
			}
		}
		pod := tmpl.DeepCopy()
		pod.ResourceVersion = strconv.FormatUint(rv, 10)
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		pod.Labels["bench-seq"] = strconv.FormatUint(i, 10)
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[sentAnnotation] = strconv.FormatInt(time.Now().UnixNano(), 10)
		select {
		case w.result <- watch.Event{Type: watch.Modified, Object: pod}:
			s.emitted.Add(1)
		case <-w.stop:
			return
		case <-s.finished:
			return
		}
	}
}

// podInformer: the factory's Pod informer (same indexers, resync and the factory's transform via
// InformerFor) with list from the real clientset and watch from the source.
func (s *syntheticSource) podInformer(namespace string) func(kubernetes.Interface, time.Duration) cache.SharedIndexInformer {
	return func(client kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		lw := &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				l, err := client.CoreV1().Pods(namespace).List(ctx, opts)
				if err == nil {
					s.onListPage(opts, l)
				}
				return l, err
			},
			WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
				return s.watch(), nil
			},
		}
		return cache.NewSharedIndexInformerWithOptions(
			cache.ToListWatcherWithWatchListSemantics(lw, noWatchList{}),
			&corev1.Pod{},
			cache.SharedIndexInformerOptions{
				ResyncPeriod: resync,
				Indexers:     cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
			})
	}
}
