// The silent-path benchmark's Go parts (tools/bench/silent.sh):
//
//	clientgo-storm silent-proxy -listen 127.0.0.1:0 -upstream HOST:PORT -port-file F
//	    A plain TCP forwarder (TLS passes through untouched). On SIGUSR1 every connection open
//	    at that moment goes silent for ever: nothing more is forwarded either way, and the
//	    connection is neither closed nor reset (not even when a side closes it) until the process
//	    exits. Connections accepted afterwards forward normally. One stderr line per connection
//	    event; the chosen port is written to -port-file.
//	clientgo-storm watch-pods -namespace NS -ready-file F
//	    client-go as its users run it: one clientset from the kubeconfig with the default rest
//	    config (protobuf for built-in types), one SharedInformerFactory, one Pod informer on NS.
//	    Writes -ready-file once synced; prints "<unix ns> ADDED ns/name" per add to stdout. On
//	    SIGTERM/SIGINT prints one JSON line to stderr with the requests it sent after the sync
//	    (counted with the wrapping RoundTripper of `run`).
//	clientgo-storm create-pod -namespace NS [-name N]
//	    Makes NS exist and, with -name, creates Pod N in it (it never runs: any image).
//	clientgo-storm delete-pod -namespace NS -name N
//
// create-pod and delete-pod refuse a server that is not on a loopback address.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"kinformer.dev/bench/internal/cli"
	"kinformer.dev/bench/internal/kube"
)

// ---------------------------------------------------------------------------------------------
// silent-proxy

type proxyConn struct {
	id       int64
	client   net.Conn
	upstream net.Conn
	silent   atomic.Bool
}

type silentProxy struct {
	mu    sync.Mutex
	conns map[int64]*proxyConn // every connection not fully closed, silenced ones for ever
	next  int64
	never chan struct{} // never closed: silenced copiers wait on it
}

func plog(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "silent-proxy %s "+format+"\n",
		append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

// pipe copies src to dst until EOF or an error, unless the connection goes silent: then it
// neither writes what it holds nor reads again nor closes anything, for ever.
func (p *silentProxy) pipe(c *proxyConn, dir string, dst, src net.Conn, done chan<- int64) {
	buf := make([]byte, 32*1024)
	var n int64
	for {
		k, err := src.Read(buf)
		if c.silent.Load() {
			<-p.never
		}
		if k > 0 {
			if _, werr := dst.Write(buf[:k]); werr != nil {
				plog("conn=%d %s write error after %d bytes: %v", c.id, dir, n, werr)
				break
			}
			n += int64(k)
		}
		if err != nil {
			if err != io.EOF {
				plog("conn=%d %s read error after %d bytes: %v", c.id, dir, n, err)
			}
			break
		}
	}
	if c.silent.Load() {
		<-p.never
	}
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite() // pass the half-close on
	}
	done <- n
}

func (p *silentProxy) serve(c *proxyConn) {
	done := make(chan int64, 2)
	go p.pipe(c, "client->upstream", c.upstream, c.client, done)
	go p.pipe(c, "upstream->client", c.client, c.upstream, done)
	up, down := <-done, <-done
	_ = c.client.Close()
	_ = c.upstream.Close()
	p.mu.Lock()
	delete(p.conns, c.id)
	p.mu.Unlock()
	plog("conn=%d closed (%d + %d bytes)", c.id, up, down)
}

func (p *silentProxy) silence() {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.conns {
		if !c.silent.Swap(true) {
			plog("conn=%d silenced (%s)", c.id, c.client.RemoteAddr())
			n++
		}
	}
	plog("SIGUSR1: %d connections silenced, %d open in all", n, len(p.conns))
}

func silentProxyCmd(args []string) {
	fs := flag.NewFlagSet("silent-proxy", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	upstream := fs.String("upstream", "", "HOST:PORT to forward to")
	portFile := fs.String("port-file", "", "file to write the listening port to")
	_ = fs.Parse(args)
	if *upstream == "" {
		die("silent-proxy: -upstream is required")
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		die("silent-proxy: %v", err)
	}
	p := &silentProxy{conns: map[int64]*proxyConn{}, never: make(chan struct{})}
	port := ln.Addr().(*net.TCPAddr).Port
	if *portFile != "" {
		if err := os.WriteFile(*portFile+".tmp", []byte(strconv.Itoa(port)+"\n"), 0o644); err != nil {
			die("silent-proxy: %v", err)
		}
		if err := os.Rename(*portFile+".tmp", *portFile); err != nil {
			die("silent-proxy: %v", err)
		}
	}
	plog("listening on %s, forwarding to %s", ln.Addr(), *upstream)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGUSR1, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		for s := range sigs {
			if s == syscall.SIGUSR1 {
				p.silence()
				continue
			}
			plog("%v: exiting", s)
			os.Exit(0)
		}
	}()
	for {
		cl, err := ln.Accept()
		if err != nil {
			plog("accept: %v", err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		up, err := net.DialTimeout("tcp", *upstream, 10*time.Second)
		if err != nil {
			plog("dial %s: %v; closing the client's connection", *upstream, err)
			_ = cl.Close()
			continue
		}
		p.mu.Lock()
		p.next++
		c := &proxyConn{id: p.next, client: cl, upstream: up}
		p.conns[c.id] = c
		p.mu.Unlock()
		plog("conn=%d open from %s", c.id, cl.RemoteAddr())
		go p.serve(c)
	}
}

// ---------------------------------------------------------------------------------------------
// watch-pods

func watchPods(args []string) {
	fs := flag.NewFlagSet("watch-pods", flag.ExitOnError)
	kubeconfig := cli.Kubeconfig(fs)
	namespace := fs.String("namespace", "", "namespace of the Pod informer")
	readyFile := fs.String("ready-file", "", "written once synced")
	syncTimeout := fs.Float64("sync-timeout", 120, "seconds")
	_ = fs.Parse(args)
	if *namespace == "" || *readyFile == "" {
		die("watch-pods: -namespace and -ready-file are required")
	}
	cs, counter := countingClientset(*kubeconfig, "clientgo-storm-watch-pods/0.36")
	out := bufio.NewWriter(os.Stdout)
	var outMu sync.Mutex
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(*namespace))
	inf := f.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			now := time.Now().UnixNano()
			p, ok := obj.(*corev1.Pod)
			if !ok {
				return
			}
			outMu.Lock()
			fmt.Fprintf(out, "%d ADDED %s/%s\n", now, p.Namespace, p.Name)
			_ = out.Flush()
			outMu.Unlock()
		},
	}); err != nil {
		die("%v", err)
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	stop := make(chan struct{})
	start := time.Now()
	f.Start(stop)
	syncCtx, cancel := context.WithTimeout(context.Background(), time.Duration(*syncTimeout*float64(time.Second)))
	ok := cache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced)
	cancel()
	if !ok {
		die("watch-pods: not synced within %.0f s", *syncTimeout)
	}
	syncedAt := time.Now().UnixNano()
	fmt.Fprintf(os.Stderr, "watch-pods: synced after %.2f s\n", time.Since(start).Seconds())
	if err := os.WriteFile(*readyFile, []byte("ready\n"), 0o644); err != nil {
		die("%v", err)
	}
	s := <-sigs
	counts := map[string]int{}
	failed := 0
	for _, e := range counter.Requests() {
		if e.UnixNS < syncedAt {
			continue
		}
		counts[e.Kind]++
		if !e.OK {
			failed++
		}
	}
	b, _ := json.Marshal(map[string]any{
		"side": "client-go", "signal": s.String(), "after_sync_s": float64(time.Now().UnixNano()-syncedAt) / 1e9,
		"lists": counts["list"], "watches": counts["watch"], "watch_lists": counts["watchlist"], "failed_requests": failed,
	})
	fmt.Fprintf(os.Stderr, "watch-pods: requests after sync %s\n", b)
	close(stop)
	kube.Shutdown(f, 5*time.Second)
}

// ---------------------------------------------------------------------------------------------
// create-pod, delete-pod

func createPod(args []string) {
	fs := flag.NewFlagSet("create-pod", flag.ExitOnError)
	kubeconfig := cli.Kubeconfig(fs)
	namespace := fs.String("namespace", "", "namespace (made to exist)")
	name := fs.String("name", "", "Pod to create (none: only the namespace)")
	_ = fs.Parse(args)
	if *namespace == "" {
		die("create-pod: -namespace is required")
	}
	cs := adminClient(*kubeconfig)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := kube.EnsureNamespace(ctx, cs, *namespace); err != nil {
		die("create-pod: namespace %s: %v", *namespace, err)
	}
	if *name == "" {
		return
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: *name, Namespace: *namespace, Labels: map[string]string{"app": "silent-bench"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}
	created, err := cs.CoreV1().Pods(*namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		die("create-pod: %s/%s: %v", *namespace, *name, err)
	}
	fmt.Printf("%d created %s/%s rv=%s\n", time.Now().UnixNano(), *namespace, *name, created.ResourceVersion)
}

func deletePod(args []string) {
	fs := flag.NewFlagSet("delete-pod", flag.ExitOnError)
	kubeconfig := cli.Kubeconfig(fs)
	namespace := fs.String("namespace", "", "namespace")
	name := fs.String("name", "", "Pod")
	_ = fs.Parse(args)
	if *namespace == "" || *name == "" {
		die("delete-pod: -namespace and -name are required")
	}
	cs := adminClient(*kubeconfig)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	zero := int64(0)
	err := cs.CoreV1().Pods(*namespace).Delete(ctx, *name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if err != nil && !apierrors.IsNotFound(err) {
		die("delete-pod: %s/%s: %v", *namespace, *name, err)
	}
}
