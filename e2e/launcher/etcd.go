package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

const (
	etcdMember = "kinformer-e2e"
	// compactRevKey is the etcd key kube-apiserver uses to coordinate compactions.
	compactRevKey = "compact_rev_key"
)

// cmdEtcd is the hidden `etcd` subcommand: an embedded etcd v3.6 server in the
// foreground until SIGTERM/SIGINT. `up` starts the launcher itself with it.
func cmdEtcd(args []string) error {
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	dataDir := fs.String("data-dir", "", "etcd data folder")
	listen := fs.String("listen", "127.0.0.1:2379", "client address host:port")
	peer := fs.String("peer", "127.0.0.1:2380", "peer address host:port")
	progressEvery := fs.Duration("progress-notify-interval", 5*time.Second,
		"interval of watch progress notifications (kube-apiserver needs them for WatchList)")
	noFsync := fs.Bool("unsafe-no-fsync", true, "skip fsync (test data only)")
	logLevel := fs.String("log-level", "info", "etcd log level")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *dataDir == "" {
		return errors.New("--data-dir is required")
	}
	clientURL, err := url.Parse("http://" + *listen)
	if err != nil {
		return err
	}
	peerURL, err := url.Parse("http://" + *peer)
	if err != nil {
		return err
	}

	cfg := embed.NewConfig()
	cfg.Name = etcdMember
	cfg.Dir = *dataDir
	cfg.ListenClientUrls = []url.URL{*clientURL}
	cfg.AdvertiseClientUrls = []url.URL{*clientURL}
	cfg.ListenPeerUrls = []url.URL{*peerURL}
	cfg.AdvertisePeerUrls = []url.URL{*peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.InitialClusterToken = "kinformer-e2e"
	// etcd 3.6 name of --experimental-watch-progress-notify-interval.
	cfg.WatchProgressNotifyInterval = *progressEvery
	// embed.NewConfig leaves this at 0 (only the flag parser sets the
	// default), which logs every request as "expensive".
	cfg.WarningUnaryRequestDuration = embed.DefaultWarningUnaryRequestDuration
	cfg.UnsafeNoFsync = *noFsync
	cfg.LogOutputs = []string{"stderr"}
	cfg.LogLevel = *logLevel

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start etcd: %w", err)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	select {
	case <-e.Server.ReadyNotify():
		fmt.Fprintf(os.Stderr, "kinformer-e2e etcd: ready, clients on %s\n", clientURL)
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("etcd failed while starting: %w", err)
	case <-time.After(60 * time.Second):
		e.Server.Stop()
		e.Close()
		return errors.New("etcd took more than 60s to become ready")
	case s := <-sigs:
		e.Close()
		fmt.Fprintf(os.Stderr, "kinformer-e2e etcd: %s while starting; stopped\n", s)
		return nil
	}
	select {
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("etcd failed: %w", err)
	case s := <-sigs:
		fmt.Fprintf(os.Stderr, "kinformer-e2e etcd: %s, shutting down\n", s)
		e.Close()
		return nil
	}
}

// waitEtcdHealthy polls etcd's /health endpoint.
func waitEtcdHealthy(clientURL string, timeout time.Duration, exited <-chan struct{}) error {
	deadline := time.Now().Add(timeout)
	c := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := c.Get(clientURL + "/health")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(b), `"true"`) {
				return nil
			}
		}
		select {
		case <-exited:
			return errors.New("etcd exited")
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcd not healthy after %s", timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func newEtcdClient(endpoint string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
}

// cmdCompact compacts etcd (physically) past its current revision, so that
// every resourceVersion that existed before is gone: lists at them and
// watches from them that reach etcd answer 410 Gone. Watches served by
// kube-apiserver's watch cache give 410 only once its event window no longer
// holds them (e.g. after restart-apiserver).
func cmdCompact(args []string) error {
	fs, dir := newFlagSet("compact")
	wait := fs.Bool("wait", true, "wait (up to ~15s) until kube-apiserver's watch caches have dropped the compacted revisions for common resources")
	l, st, err := openDir(fs, dir, args)
	if err != nil {
		return err
	}
	if st == nil || !st.etcdAlive() {
		return fmt.Errorf("etcd is not running in %s (run `up` first)", l.Dir)
	}
	cli, err := newEtcdClient(st.EtcdURL)
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, compactRevKey, clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("read current revision: %w", err)
	}
	// Every revision that exists now must become unusable, also for watches:
	// kube-apiserver watches "from resourceVersion X" starting at X+1, and
	// etcd still serves the compaction revision itself. So compact to the
	// current revision + 2, made by two writes of compact_rev_key.
	//
	// That key is how kube-apiserver's own compactor announces compactions
	// (its value is the compacted revision, its version the compactors'
	// logical clock). kube-apiserver watches it and trims its watch-cache
	// snapshots to match; its next own compaction loses the
	// compare-and-swap and adopts our value.
	target := resp.Header.Revision + 2
	var rev int64
	for range 2 {
		put, err := cli.Put(ctx, compactRevKey, strconv.FormatInt(target, 10))
		if err != nil {
			return fmt.Errorf("record compaction: %w", err)
		}
		rev = put.Header.Revision
	}
	if rev != target { // a concurrent write: announce the real revision
		if _, err := cli.Put(ctx, compactRevKey, strconv.FormatInt(rev, 10)); err != nil {
			return fmt.Errorf("record compaction: %w", err)
		}
	}
	if _, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil &&
		!errors.Is(err, rpctypes.ErrCompacted) {
		return fmt.Errorf("compact to %d: %w", rev, err)
	}
	progress("compacted etcd to revision %d", rev)
	if *wait && st.apiserverAlive() {
		if err := waitCacheCompacted(st, rev, 45*time.Second); err != nil {
			return err
		}
	}
	fmt.Println(rev)
	return nil
}

// cachedLists are resources whose watch-cache snapshots `compact --wait`
// checks.
var cachedLists = []string{
	"/api/v1/secrets", "/api/v1/configmaps", "/api/v1/pods", "/api/v1/services",
	"/api/v1/endpoints", "/api/v1/namespaces", "/apis/discovery.k8s.io/v1/endpointslices",
}

// waitCacheCompacted waits until an exact list just below rev answers 410 for
// every resource in cachedLists. kube-apiserver's watch caches poll the
// compaction revision every 15s; until they do, they may still serve lists
// (and continue tokens) at compacted revisions. Watches from an old
// resourceVersion are served from the watch cache's event window and give
// 410 only once that window no longer holds them (e.g. after
// restart-apiserver).
func waitCacheCompacted(st *state, rev int64, timeout time.Duration) error {
	c, err := tlsClient(st.Paths)
	if err != nil {
		return err
	}
	progress("waiting for kube-apiserver's caches to notice the compaction")
	start := time.Now()
	pending := append([]string(nil), cachedLists...)
	for len(pending) > 0 {
		var still []string
		for _, p := range pending {
			u := fmt.Sprintf("%s%s?resourceVersion=%d&resourceVersionMatch=Exact&limit=1", st.APIServerURL, p, rev-1)
			resp, err := c.Get(u)
			if err != nil {
				still = append(still, p)
				continue
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusGone {
				still = append(still, p)
			}
		}
		pending = still
		if len(pending) == 0 {
			break
		}
		if time.Since(start) > timeout {
			return fmt.Errorf("after %s, lists at revision %d are still served for %v", timeout, rev-1, pending)
		}
		time.Sleep(500 * time.Millisecond)
	}
	progress("kube-apiserver answers 410 for revisions below %d (after %.1fs)", rev, time.Since(start).Seconds())
	return nil
}
