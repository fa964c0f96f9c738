// fanout-loader: loads and patches the Pods of the fan-out benchmark (tools/bench/fanout.sh).
//
//	fanout-loader load  -namespace NS -pods N [-workers 32]
//	    Makes NS hold exactly the Pods pod-00000 .. pod-<N-1> (concurrent creates; extra Pods
//	    are deleted; -pods 0 empties NS). Pods are never scheduled (the e2e launcher has no scheduler): they only
//	    need to be stored and watched.
//	fanout-loader sync-load -pods N -secrets N -slices N [-namespaces 4] [-workers 32]
//	    The objects of the sync benchmark (tools/bench/sync.sh): see sync.go.
//	fanout-loader patch -namespace NS -pods N -rate R -duration D [-workers 64]
//	    Merge-patches one Pod after another (round robin) at R patches/s for D: a new label
//	    value and the annotation bench.kinformer.dev/sent (wall clock, ns). Prints one JSON line
//	    with the rate achieved.
//
// Refuses a server that is not on a loopback address. Every loop is bounded in time and count.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"kinformer.dev/bench/internal/cli"
	"kinformer.dev/bench/internal/kube"
	"kinformer.dev/bench/internal/par"
)

var die = cli.Die

// client: the loader's clientset (kube.WriterClient: loopback only, no rate limit: the loader is
// the load).
func client(kubeconfig string) *kubernetes.Clientset {
	cs, err := kube.WriterClient(kubeconfig, "fanout-loader")
	if err != nil {
		die("%v", err)
	}
	return cs
}

func podName(i int) string { return fmt.Sprintf("pod-%05d", i) }

// A Deployment's Pod as the API server stores it (about 1.5 KB of JSON): labels, a few
// annotations, an owner, an app container and a sidecar with ports and resources.
func newPod(ns string, i int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      podName(i),
			Namespace: ns,
			Labels: map[string]string{
				"app": "fanout", "version": "v1", "pod-template-hash": "5d8f7c9b4",
				"security.istio.io/tlsMode": "istio", "service.istio.io/canonical-name": "fanout",
				"bench-seq": "0",
			},
			Annotations: map[string]string{
				"kubectl.kubernetes.io/default-container": "app",
				"prometheus.io/scrape":                    "true",
				"prometheus.io/port":                      "15020",
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "fanout-5d8f7c9b4",
				UID: types.UID("9f1c2c3e-0000-4000-8000-000000000001"),
			}},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{
				{
					Name: "app", Image: "registry.example/fanout/app:1.0",
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi"),
					}},
				},
				{
					Name: "istio-proxy", Image: "registry.example/istio/proxyv2:1.24",
					Args:  []string{"proxy", "sidecar", "--log_output_level=default:info"},
					Ports: []corev1.ContainerPort{{Name: "http-envoy-prom", ContainerPort: 15090}},
				},
			},
		},
	}
}

// run calls fn(i) for i in [0, n) on `workers` goroutines; returns the number of errors.
var run = par.Each

func load(cs *kubernetes.Clientset, ns string, pods, workers int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := kube.EnsureNamespace(ctx, cs, ns); err != nil {
		die("create namespace %s: %v", ns, err)
	}
	want := map[string]bool{}
	for i := 0; i < pods; i++ {
		want[podName(i)] = true
	}
	have := map[string]bool{}
	var extra []string
	opts := metav1.ListOptions{Limit: 1000}
	for page := 0; page < 10000; page++ {
		list, err := cs.CoreV1().Pods(ns).List(ctx, opts)
		if err != nil {
			die("list pods: %v", err)
		}
		for _, p := range list.Items {
			have[p.Name] = true
			if !want[p.Name] {
				extra = append(extra, p.Name)
			}
		}
		if list.Continue == "" {
			break
		}
		opts.Continue = list.Continue
	}
	var missing []int
	for i := 0; i < pods; i++ {
		if !have[podName(i)] {
			missing = append(missing, i)
		}
	}
	start := time.Now()
	errs := run(len(missing), workers, func(k int) error {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, newPod(ns, missing[k]), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	zero := int64(0)
	errs += run(len(extra), workers, func(k int) error {
		err := cs.CoreV1().Pods(ns).Delete(ctx, extra[k], metav1.DeleteOptions{GracePeriodSeconds: &zero})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	elapsed := time.Since(start).Seconds()
	out, _ := json.Marshal(map[string]any{
		"namespace": ns, "pods": pods, "existing": len(have), "created": len(missing), "deleted": len(extra),
		"errors": errs, "seconds": elapsed,
	})
	fmt.Println(string(out))
	if errs > 0 {
		os.Exit(1)
	}
}

func patch(cs *kubernetes.Clientset, ns string, pods, workers int, rate float64, duration time.Duration) {
	if rate <= 0 || rate > 100000 || duration <= 0 || duration > 10*time.Minute || pods <= 0 {
		die("patch: need 0 < -rate <= 100000, 0 < -duration <= 10m, -pods > 0")
	}
	ctx, cancel := context.WithTimeout(context.Background(), duration+30*time.Second)
	defer cancel()
	rc := cs.CoreV1().RESTClient()
	tokens := make(chan int64, workers)
	var ok, failed atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := range tokens {
				body := fmt.Sprintf(`{"metadata":{"labels":{"bench-seq":"%d"},"annotations":{"bench.kinformer.dev/sent":"%d"}}}`,
					seq, time.Now().UnixNano())
				rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
				// The response (the patched Pod) is read but never decoded: the patcher's own
				// CPU should go to sending.
				err := rc.Patch(types.MergePatchType).Namespace(ns).Resource("pods").
					Name(podName(int(seq % int64(pods)))).Body([]byte(body)).Do(rctx).Error()
				rcancel()
				if err != nil {
					if failed.Add(1) <= 5 {
						fmt.Fprintf(os.Stderr, "fanout-loader: patch: %v\n", err)
					}
				} else {
					ok.Add(1)
				}
			}
		}()
	}
	// Pacer: issue round(rate * elapsed) patches; when every worker is busy the token is
	// dropped (counted), so the offered rate never builds a backlog.
	start := time.Now()
	var issued, dropped int64
	ticker := time.NewTicker(time.Millisecond)
	for now := range ticker.C {
		elapsed := now.Sub(start)
		if elapsed >= duration {
			break
		}
		target := int64(rate * elapsed.Seconds())
		for ; issued < target; issued++ {
			select {
			case tokens <- issued:
			default:
				dropped++
			}
		}
	}
	ticker.Stop()
	close(tokens)
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	out, _ := json.Marshal(map[string]any{
		"namespace": ns, "target_rate": rate, "seconds": elapsed, "patched": ok.Load(), "failed": failed.Load(),
		"dropped": dropped, "achieved_rate": float64(ok.Load()) / duration.Seconds(),
	})
	fmt.Println(string(out))
}

func main() {
	cli.Name, cli.ExitCode = "fanout-loader", 1
	if len(os.Args) < 2 || (os.Args[1] != "load" && os.Args[1] != "patch" && os.Args[1] != "sync-load") {
		die("usage: fanout-loader load|sync-load|patch [flags]")
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	kubeconfig := cli.Kubeconfig(fs)
	ns := fs.String("namespace", "fanout-bench", "namespace")
	pods := fs.Int("pods", 5000, "Pods")
	workers := fs.Int("workers", 0, "concurrent requests (default: load 32, patch 64)")
	rate := fs.Float64("rate", 1000, "patch: patches per second")
	duration := fs.Duration("duration", 10*time.Second, "patch: how long")
	secrets := fs.Int("secrets", 2000, "sync-load: Secrets")
	slices := fs.Int("slices", 1000, "sync-load: EndpointSlices")
	namespaces := fs.Int("namespaces", 4, "sync-load: namespaces sync-0 .. sync-<N-1>")
	_ = fs.Parse(os.Args[2:])
	minPods := 1
	if os.Args[1] == "load" {
		minPods = 0 // empties the namespace
	}
	if *pods < minPods || *pods > 200000 {
		die("-pods must be in [%d, 200000]", minPods)
	}
	cs := client(*kubeconfig)
	switch os.Args[1] {
	case "load":
		if *workers <= 0 {
			*workers = 32
		}
		load(cs, *ns, *pods, *workers)
	case "sync-load":
		if *workers <= 0 {
			*workers = 32
		}
		syncLoad(cs, *pods, *secrets, *slices, *namespaces, *workers)
	case "patch":
		if *workers <= 0 {
			*workers = 64
		}
		patch(cs, *ns, *pods, *workers, *rate, *duration)
	}
}
