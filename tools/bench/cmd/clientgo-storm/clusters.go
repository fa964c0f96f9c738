package main

// clientgo-storm clusters -clusters N -namespace NS -ready-file F [-sync-timeout 300]
//
//	The client-go peer of `kwatch endpoints SVC -n NS --watch` with N remote clusters (threads.sh):
//	N+1 clusters, each with a clientset of its own (its own transport and connections, as for
//	clusters that really differ; all of them the kubeconfig's server here), one
//	SharedInformerFactory per cluster on NS with an EndpointSlice and a Pod informer (what
//	kinformer's endpoint feed watches per cluster), every client-go default left alone. Writes
//	-ready-file once every informer synced, then runs until SIGTERM.

import (
	"context"
	"flag"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"kinformer.dev/bench/internal/cli"
	"kinformer.dev/bench/internal/kube"
)

func clusters(args []string) {
	fs := flag.NewFlagSet("clusters", flag.ExitOnError)
	kubeconfig := cli.Kubeconfig(fs)
	n := fs.Int("clusters", 1, "remote clusters (one more, the local one, is added)")
	namespace := fs.String("namespace", "", "the namespace watched in every cluster")
	readyFile := fs.String("ready-file", "", "written once synced")
	syncTimeout := fs.Float64("sync-timeout", 300, "seconds")
	_ = fs.Parse(args)
	if *namespace == "" || *readyFile == "" || *n < 0 || *n > 1000 {
		die("clusters: -namespace and -ready-file required; -clusters in [0, 1000]")
	}
	stop := make(chan struct{})
	var synced []cache.InformerSynced
	for i := 0; i <= *n; i++ {
		cfg, err := kube.Config(*kubeconfig, kube.Protobuf)
		if err != nil {
			die("%v", err)
		}
		cfg.UserAgent = "clientgo-storm-clusters/0.36"
		// A dialer of its own keeps client-go from sharing one transport between equal configs:
		// each cluster gets its connections, as distinct clusters would.
		cfg.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			die("%v", err)
		}
		f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(*namespace))
		synced = append(synced, f.Discovery().V1().EndpointSlices().Informer().HasSynced,
			f.Core().V1().Pods().Informer().HasSynced)
		f.Start(stop)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(*syncTimeout*float64(time.Second)))
	ok := cache.WaitForCacheSync(ctx.Done(), synced...)
	cancel()
	if !ok {
		die("not synced within %.0f s", *syncTimeout)
	}
	if err := os.WriteFile(*readyFile, []byte("ready\n"), 0o644); err != nil {
		die("%v", err)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	close(stop)
}
