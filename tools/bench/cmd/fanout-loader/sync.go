// The objects of the side-by-side sync benchmark (tools/bench/sync.sh):
//
//	fanout-loader sync-load -pods N -secrets N -slices N [-namespaces 4] [-workers 32]
//
// Makes the namespaces sync-0 .. sync-<K-1> hold exactly pod-00000 .. pod-<N-1>,
// secret-00000 .. and svc-0000-slice .. (object i in namespace sync-<i mod K>), creating the
// missing ones concurrently and deleting extra ones, so a second run with the same counts
// only lists (idempotent). Also creates the empty namespace sync-empty (the zero-object
// baseline). Prints one JSON line with what it did and the cluster-wide totals per resource
// (what a cluster-wide informer lists, the benchmark's own objects and any others).
//
//   - Pods: newPod (about 1.5 KB of JSON, never scheduled).
//   - Secrets: type Opaque, three data keys of 1-2 KB of random bytes each (seeded by i, so a
//     Secret's content is the same in every run).
//   - EndpointSlices: 50 IPv4 endpoints each (address, ready/serving/terminating, node, zone,
//     a Pod targetRef), two ports, the kubernetes.io/service-name label.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"kinformer.dev/bench/internal/kube"
)

const syncEmptyNamespace = "sync-empty"

func syncNamespace(i, namespaces int) string { return fmt.Sprintf("sync-%d", i%namespaces) }
func secretName(i int) string                { return fmt.Sprintf("secret-%05d", i) }
func sliceName(i int) string                 { return fmt.Sprintf("svc-%04d-slice", i) }

// secretSizes are the sizes of Secret i's three data values (decoded), as newSecret makes them.
func secretSizes(i int) [3]int {
	r := rand.New(rand.NewSource(int64(i) + 1))
	return [3]int{1024 + r.Intn(1025), 1024 + r.Intn(1025), 1024 + r.Intn(1025)}
}

func newSecret(ns string, i int) *corev1.Secret {
	sizes := secretSizes(i)
	r := rand.New(rand.NewSource(int64(i) + 1_000_003))
	data := map[string][]byte{}
	for k, key := range []string{"ca.crt", "tls.crt", "tls.key"} {
		b := make([]byte, sizes[k])
		r.Read(b)
		data[key] = b
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: secretName(i), Namespace: ns,
			Labels: map[string]string{"app": "sync-bench", "bench-seq": "0"},
		},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}
}

func newSlice(ns string, i int) *discoveryv1.EndpointSlice {
	yes, no := true, false
	eps := make([]discoveryv1.Endpoint, 50)
	for e := range eps {
		node := fmt.Sprintf("node-%03d", (i*7+e)%200)
		zone := fmt.Sprintf("zone-%c", 'a'+rune((i+e)%3))
		eps[e] = discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", 1+i/250%250, i%250, 1+e)},
			Conditions: discoveryv1.EndpointConditions{Ready: &yes, Serving: &yes, Terminating: &no},
			NodeName:   &node,
			Zone:       &zone,
			TargetRef: &corev1.ObjectReference{
				Kind: "Pod", Namespace: ns, Name: fmt.Sprintf("svc-%04d-%02d", i, e),
				UID: types.UID(fmt.Sprintf("6a1f0000-0000-4000-8000-%06d%06d", i, e)),
			},
		}
	}
	http, grpc := "http", "grpc"
	p8080, p9090 := int32(8080), int32(9090)
	tcp := corev1.ProtocolTCP
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: sliceName(i), Namespace: ns,
			Labels: map[string]string{
				"kubernetes.io/service-name":             fmt.Sprintf("svc-%04d", i),
				"endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
			},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   eps,
		Ports: []discoveryv1.EndpointPort{
			{Name: &http, Port: &p8080, Protocol: &tcp},
			{Name: &grpc, Port: &p9090, Protocol: &tcp},
		},
	}
}

// syncKind: one resource of the sync load.
type syncKind struct {
	name   string
	n      int
	objNS  func(i int) string
	objKey func(i int) string
	// list returns every object's "namespace/name" cluster-wide, one page at a time.
	list   func(ctx context.Context, opts metav1.ListOptions) (keys []string, cont string, err error)
	create func(ctx context.Context, i int) error
	del    func(ctx context.Context, ns, name string) error
}

// reconcile makes the sync namespaces hold exactly the kind's n objects; returns created,
// deleted, the cluster-wide total afterwards and the number of errors.
func reconcile(ctx context.Context, k syncKind, namespaces, workers int) (created, deleted, total int, errs int64) {
	want := map[string]int{}
	for i := 0; i < k.n; i++ {
		want[k.objNS(i)+"/"+k.objKey(i)] = i
	}
	ours := map[string]bool{}
	for i := 0; i < namespaces; i++ {
		ours[syncNamespace(i, namespaces)] = true
	}
	ours[syncEmptyNamespace] = true
	have := map[string]bool{}
	var extra [][2]string
	others := 0
	opts := metav1.ListOptions{Limit: 1000}
	for page := 0; page < 10000; page++ {
		keys, cont, err := k.list(ctx, opts)
		if err != nil {
			die("list %s: %v", k.name, err)
		}
		for _, key := range keys {
			ns, name := splitKey(key)
			if _, ok := want[key]; ok {
				have[key] = true
			} else if ours[ns] {
				extra = append(extra, [2]string{ns, name})
			} else {
				others++
			}
		}
		if cont == "" {
			break
		}
		opts.Continue = cont
	}
	var missing []int
	for i := 0; i < k.n; i++ {
		if !have[k.objNS(i)+"/"+k.objKey(i)] {
			missing = append(missing, i)
		}
	}
	errs = run(len(missing), workers, func(m int) error {
		err := k.create(ctx, missing[m])
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	errs += run(len(extra), workers, func(m int) error {
		err := k.del(ctx, extra[m][0], extra[m][1])
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	return len(missing), len(extra), k.n + others, errs
}

func splitKey(key string) (string, string) {
	for i := 0; i < len(key); i++ {
		if key[i] == '/' {
			return key[:i], key[i+1:]
		}
	}
	return "", key
}

func syncLoad(cs *kubernetes.Clientset, pods, secrets, slices, namespaces, workers int) {
	if namespaces < 1 || namespaces > 100 || secrets < 0 || secrets > 100000 || slices < 0 || slices > 100000 {
		die("sync-load: need 1 <= -namespaces <= 100, 0 <= -secrets, -slices <= 100000")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	for i := 0; i <= namespaces; i++ {
		name := syncEmptyNamespace
		if i < namespaces {
			name = syncNamespace(i, namespaces)
		}
		if err := kube.EnsureNamespace(ctx, cs, name); err != nil {
			die("create namespace %s: %v", name, err)
		}
	}
	nsOf := func(i int) string { return syncNamespace(i, namespaces) }
	zero := int64(0)
	delOpts := metav1.DeleteOptions{GracePeriodSeconds: &zero}
	kinds := []syncKind{
		{
			name: "pods", n: pods, objNS: nsOf, objKey: podName,
			list: func(ctx context.Context, o metav1.ListOptions) ([]string, string, error) {
				l, err := cs.CoreV1().Pods("").List(ctx, o)
				if err != nil {
					return nil, "", err
				}
				keys := make([]string, len(l.Items))
				for i := range l.Items {
					keys[i] = l.Items[i].Namespace + "/" + l.Items[i].Name
				}
				return keys, l.Continue, nil
			},
			create: func(ctx context.Context, i int) error {
				_, err := cs.CoreV1().Pods(nsOf(i)).Create(ctx, newPod(nsOf(i), i), metav1.CreateOptions{})
				return err
			},
			del: func(ctx context.Context, ns, name string) error {
				return cs.CoreV1().Pods(ns).Delete(ctx, name, delOpts)
			},
		},
		{
			name: "secrets", n: secrets, objNS: nsOf, objKey: secretName,
			list: func(ctx context.Context, o metav1.ListOptions) ([]string, string, error) {
				l, err := cs.CoreV1().Secrets("").List(ctx, o)
				if err != nil {
					return nil, "", err
				}
				keys := make([]string, len(l.Items))
				for i := range l.Items {
					keys[i] = l.Items[i].Namespace + "/" + l.Items[i].Name
				}
				return keys, l.Continue, nil
			},
			create: func(ctx context.Context, i int) error {
				_, err := cs.CoreV1().Secrets(nsOf(i)).Create(ctx, newSecret(nsOf(i), i), metav1.CreateOptions{})
				return err
			},
			del: func(ctx context.Context, ns, name string) error {
				return cs.CoreV1().Secrets(ns).Delete(ctx, name, delOpts)
			},
		},
		{
			name: "endpointslices", n: slices, objNS: nsOf, objKey: sliceName,
			list: func(ctx context.Context, o metav1.ListOptions) ([]string, string, error) {
				l, err := cs.DiscoveryV1().EndpointSlices("").List(ctx, o)
				if err != nil {
					return nil, "", err
				}
				keys := make([]string, len(l.Items))
				for i := range l.Items {
					keys[i] = l.Items[i].Namespace + "/" + l.Items[i].Name
				}
				return keys, l.Continue, nil
			},
			create: func(ctx context.Context, i int) error {
				_, err := cs.DiscoveryV1().EndpointSlices(nsOf(i)).Create(ctx, newSlice(nsOf(i), i), metav1.CreateOptions{})
				return err
			},
			del: func(ctx context.Context, ns, name string) error {
				return cs.DiscoveryV1().EndpointSlices(ns).Delete(ctx, name, delOpts)
			},
		},
	}
	start := time.Now()
	out := map[string]any{"namespaces": namespaces}
	var errs int64
	for _, k := range kinds {
		c, d, total, e := reconcile(ctx, k, namespaces, workers)
		errs += e
		out[k.name] = k.n
		out[k.name+"_created"] = c
		out[k.name+"_deleted"] = d
		out[k.name+"_total"] = total
	}
	dataBytes := 0
	for i := 0; i < secrets; i++ {
		for _, s := range secretSizes(i) {
			dataBytes += s
		}
	}
	out["secret_data_bytes"] = dataBytes
	out["errors"] = errs
	out["seconds"] = time.Since(start).Seconds()
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
	if errs > 0 {
		fmt.Fprintf(os.Stderr, "fanout-loader: sync-load: %d errors\n", errs)
		os.Exit(1)
	}
}
