package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

const (
	apiserverGrace = 20 * time.Second
	etcdGrace      = 10 * time.Second
)

func (s *state) etcdMarks() []string {
	return []string{"etcd", "--data-dir=" + s.Paths.EtcdData}
}

func (s *state) apiserverMarks() []string {
	return []string{"kube-apiserver", "--secure-port=" + strconv.Itoa(s.APIServerPort)}
}

func (s *state) etcdAlive() bool      { return procAlive(s.Etcd.PID, s.etcdMarks()...) }
func (s *state) apiserverAlive() bool { return procAlive(s.APIServer.PID, s.apiserverMarks()...) }

// findAPIServer returns the kube-apiserver binary: --apiserver-bin, then
// $KINFORMER_KUBE_APISERVER, then next to this executable, then $PATH.
func findAPIServer(flagValue string) (string, error) {
	candidates := []string{flagValue, os.Getenv("KINFORMER_KUBE_APISERVER")}
	if self, err := os.Executable(); err == nil {
		candidates = append(candidates, filepath.Join(filepath.Dir(self), "kube-apiserver"))
	}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if fi, err := os.Stat(c); err == nil && !fi.IsDir() {
			return filepath.Abs(c)
		}
	}
	if p, err := exec.LookPath("kube-apiserver"); err == nil {
		return filepath.Abs(p)
	}
	return "", errors.New("kube-apiserver binary not found (use --apiserver-bin, $KINFORMER_KUBE_APISERVER, or e2e/launcher.sh build)")
}

func apiserverArgv(bin string, l layout, port int, etcdURL string, extra []string) []string {
	argv := []string{
		bin,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--etcd-servers=" + etcdURL,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--authorization-mode=Node,RBAC",
		"--client-ca-file=" + l.ClientCACert,
		"--tls-cert-file=" + l.ServingCert,
		"--tls-private-key-file=" + l.ServingKey,
		"--token-auth-file=" + l.TokenFile,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + l.SAPublicKey,
		"--service-account-signing-key-file=" + l.SASigningKey,
		// No controller-manager runs, so nothing would create service-account
		// tokens: let Pods be created without them.
		"--disable-admission-plugins=ServiceAccount",
		// 127.0.0.1 is not a valid endpoint address; skip the endpoints
		// reconciler of the `kubernetes` Service instead of logging errors.
		"--endpoint-reconciler-type=none",
		// EndpointSlice watches bypass the watch cache and are served by
		// etcd, so a compacted resourceVersion gives 410 Gone at once (as
		// on any server once the cache window has moved on), and
		// WatchList requests for them are refused (the LIST fallback).
		// Later --apiserver-arg=--watch-cache-sizes=... entries override it.
		"--watch-cache-sizes=endpointslices.discovery.k8s.io#0",
		"--allow-privileged=true",
		"--cert-dir=" + l.PKIDir,
		"--v=1",
	}
	return append(argv, extra...)
}

func tlsClient(l layout) (*http.Client, error) {
	caPEM, err := os.ReadFile(l.CACert)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("no certificate in %s", l.CACert)
	}
	cert, err := tls.LoadX509KeyPair(l.AdminCert, l.AdminKey)
	if err != nil {
		return nil, err
	}
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}},
			DisableKeepAlives: true,
		},
	}, nil
}

// readyz returns the status code and body of GET /readyz?verbose.
func readyz(c *http.Client, baseURL string) (int, string, error) {
	resp, err := c.Get(baseURL + "/readyz?verbose")
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(b), nil
}

// waitReady polls /readyz with the admin certificate until it answers 200.
func waitReady(st *state, timeout time.Duration, exited <-chan struct{}) error {
	c, err := tlsClient(st.Paths)
	if err != nil {
		return err
	}
	start := time.Now()
	lastReport := start
	for {
		code, body, err := readyz(c, st.APIServerURL)
		if err == nil && code == http.StatusOK {
			progress("kube-apiserver ready after %.1fs", time.Since(start).Seconds())
			return nil
		}
		// We started the process, so Wait()'s end (exited) is the authority on whether it runs.
		// A /proc check is not: right after Start() the child may still be inside execve with an
		// empty /proc/PID/cmdline, which once made a healthy kube-apiserver look dead.
		select {
		case <-exited:
			return errors.New("kube-apiserver exited")
		default:
		}
		if time.Since(start) > timeout {
			return fmt.Errorf("kube-apiserver not ready after %s", timeout)
		}
		if time.Since(lastReport) >= 5*time.Second {
			lastReport = time.Now()
			what := "not listening yet"
			if err == nil {
				var failing []string
				for _, line := range strings.Split(body, "\n") {
					if strings.HasPrefix(line, "[-]") {
						failing = append(failing, strings.Fields(strings.TrimPrefix(line, "[-]"))[0])
					}
				}
				what = fmt.Sprintf("/readyz %d, waiting for %s", code, strings.Join(failing, ", "))
			}
			progress("waiting for kube-apiserver (%.0fs): %s", time.Since(start).Seconds(), what)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func writeKubeconfig(st *state) error {
	l := st.Paths
	token, err := os.ReadFile(l.RestrictedToken)
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Config\nclusters:\n")
	for _, name := range []string{"admin", "restricted"} {
		fmt.Fprintf(&b, "- name: %s\n  cluster:\n    server: %s\n    certificate-authority: %s\n", name, st.APIServerURL, l.CACert)
	}
	b.WriteString("users:\n")
	fmt.Fprintf(&b, "- name: admin\n  user:\n    client-certificate: %s\n    client-key: %s\n", l.AdminCert, l.AdminKey)
	fmt.Fprintf(&b, "- name: restricted\n  user:\n    token: %s\n", strings.TrimSpace(string(token)))
	b.WriteString("contexts:\n")
	for _, name := range []string{"admin", "restricted"} {
		fmt.Fprintf(&b, "- name: %s\n  context:\n    cluster: %s\n    user: %s\n    namespace: default\n", name, name, name)
	}
	b.WriteString("current-context: admin\n")
	return writeFileAtomic(l.Kubeconfig, []byte(b.String()), 0o600)
}

// startAPIServer starts kube-apiserver from st.APIServer.Argv, records its
// pid and waits for /readyz.
func startAPIServer(st *state, timeout time.Duration) error {
	progress("starting kube-apiserver on %s (log %s)", st.APIServerURL, st.APIServer.Log)
	pid, exited, err := startDetached(st.APIServer.Argv, st.APIServer.Log)
	if err != nil {
		return fmt.Errorf("start kube-apiserver: %w", err)
	}
	st.APIServer.PID = pid
	if err := st.save(); err != nil {
		return err
	}
	if err := waitReady(st, timeout, exited); err != nil {
		fmt.Fprintf(os.Stderr, "---- last lines of %s ----\n%s\n----\n", st.APIServer.Log, tail(st.APIServer.Log, 30))
		return err
	}
	return nil
}

func cmdUp(args []string) error {
	fs, dir := newFlagSet("up")
	timeout := fs.Duration("timeout", 120*time.Second, "how long to wait for etcd and kube-apiserver to become ready")
	bin := fs.String("apiserver-bin", "", "kube-apiserver binary (default: next to this executable)")
	var extra stringList
	fs.Var(&extra, "apiserver-arg", "extra kube-apiserver flag, e.g. --apiserver-arg=--feature-gates=WatchList=false (repeatable)")
	if err := parse(fs, args); err != nil {
		return err
	}
	l, err := newLayout(*dir)
	if err != nil {
		return err
	}
	apiserverBin, err := findAPIServer(*bin)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}

	// A fresh start: stop whatever an earlier `up` left in DIR and remove its data.
	if old, err := loadState(l); err != nil {
		return err
	} else if old != nil {
		progress("stopping the previous cluster in %s", l.Dir)
		if err := stopAll(old); err != nil {
			return err
		}
	}
	if err := purge(l); err != nil {
		return err
	}
	for _, d := range []string{l.Dir, l.LogDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(l.EtcdData, 0o700); err != nil {
		return err
	}
	progress("generating certificates and tokens in %s", l.PKIDir)
	if err := generatePKI(l); err != nil {
		return fmt.Errorf("pki: %w", err)
	}

	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	st := &state{
		Paths:         l,
		EtcdClient:    ports[0],
		EtcdPeer:      ports[1],
		APIServerPort: ports[2],
		EtcdURL:       fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
		APIServerURL:  fmt.Sprintf("https://127.0.0.1:%d", ports[2]),
	}
	st.Etcd = procState{
		Argv: []string{self, "etcd",
			"--data-dir=" + l.EtcdData,
			fmt.Sprintf("--listen=127.0.0.1:%d", st.EtcdClient),
			fmt.Sprintf("--peer=127.0.0.1:%d", st.EtcdPeer)},
		Log: l.EtcdLog,
	}
	st.APIServer = procState{
		Argv: apiserverArgv(apiserverBin, l, st.APIServerPort, st.EtcdURL, extra),
		Log:  l.APIServerLog,
	}

	fail := func(err error) error {
		progress("startup failed; stopping what was started")
		_ = stopAll(st)
		return err
	}

	progress("starting etcd on %s (log %s)", st.EtcdURL, l.EtcdLog)
	pid, exited, err := startDetached(st.Etcd.Argv, st.Etcd.Log)
	if err != nil {
		return fmt.Errorf("start etcd: %w", err)
	}
	st.Etcd.PID = pid
	if err := st.save(); err != nil {
		return fail(err)
	}
	if err := waitEtcdHealthy(st.EtcdURL, *timeout, exited); err != nil {
		fmt.Fprintf(os.Stderr, "---- last lines of %s ----\n%s\n----\n", l.EtcdLog, tail(l.EtcdLog, 30))
		return fail(err)
	}
	progress("etcd healthy")

	if err := startAPIServer(st, *timeout); err != nil {
		return fail(err)
	}
	if err := writeKubeconfig(st); err != nil {
		return fail(err)
	}
	fmt.Printf("APISERVER=%s\n", st.APIServerURL)
	fmt.Printf("KUBECONFIG=%s\n", l.Kubeconfig)
	return nil
}

// stopAll stops kube-apiserver, then etcd, and waits for their ports to close.
func stopAll(st *state) error {
	var errs []error
	if err := stopProc("kube-apiserver", st.APIServer.PID, apiserverGrace, st.apiserverMarks()...); err != nil {
		errs = append(errs, err)
	}
	if err := stopProc("etcd", st.Etcd.PID, etcdGrace, st.etcdMarks()...); err != nil {
		errs = append(errs, err)
	}
	if err := waitPortsClosed(15*time.Second, st.APIServerPort, st.EtcdClient, st.EtcdPeer); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// purge removes everything the launcher writes in DIR (and DIR, if empty).
func purge(l layout) error {
	for _, p := range []string{l.PKIDir, l.EtcdData, l.LogDir, l.Kubeconfig, l.State} {
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	return nil
}

func cmdDown(args []string) error {
	fs, dir := newFlagSet("down")
	doPurge := fs.Bool("purge", false, "also delete certificates, etcd data, logs, kubeconfig and state.json")
	l, st, err := openDir(fs, dir, args)
	if err != nil {
		return err
	}
	if st == nil {
		progress("nothing to stop in %s", l.Dir)
	} else {
		if err := stopAll(st); err != nil {
			return err
		}
		progress("stopped")
	}
	if *doPurge {
		if err := purge(l); err != nil {
			return err
		}
		_ = os.Remove(l.Dir) // only succeeds when empty
		progress("purged %s", l.Dir)
	}
	return nil
}

func cmdRestartAPIServer(args []string) error {
	fs, dir := newFlagSet("restart-apiserver")
	timeout := fs.Duration("timeout", 120*time.Second, "how long to wait for /readyz")
	l, st, err := openDir(fs, dir, args)
	if err != nil {
		return err
	}
	if st == nil {
		return fmt.Errorf("no cluster in %s (run `up` first)", l.Dir)
	}
	if !st.etcdAlive() {
		return fmt.Errorf("etcd is not running in %s (run `up` again)", l.Dir)
	}
	if err := stopProc("kube-apiserver", st.APIServer.PID, apiserverGrace, st.apiserverMarks()...); err != nil {
		return err
	}
	if err := waitPortsClosed(15*time.Second, st.APIServerPort); err != nil {
		return err
	}
	if err := startAPIServer(st, *timeout); err != nil {
		return err
	}
	fmt.Printf("KUBECONFIG=%s\n", l.Kubeconfig)
	return nil
}

func cmdStatus(args []string) error {
	fs, dir := newFlagSet("status")
	l, st, err := openDir(fs, dir, args)
	if err != nil {
		return err
	}
	if st == nil {
		fmt.Printf("no cluster in %s\n", l.Dir)
		return exitError{3}
	}
	word := func(b bool) string {
		if b {
			return "running"
		}
		return "stopped"
	}
	etcdUp, apiUp := st.etcdAlive(), st.apiserverAlive()
	fmt.Printf("etcd            %-8s pid %-7d %s\n", word(etcdUp), st.Etcd.PID, st.EtcdURL)
	ready := ""
	if apiUp {
		if c, err := tlsClient(l); err == nil {
			if code, _, err := readyz(c, st.APIServerURL); err == nil {
				ready = fmt.Sprintf(" (/readyz %d)", code)
			} else {
				ready = " (/readyz unreachable)"
			}
		}
	}
	fmt.Printf("kube-apiserver  %-8s pid %-7d %s%s\n", word(apiUp), st.APIServer.PID, st.APIServerURL, ready)
	fmt.Printf("KUBECONFIG=%s\n", l.Kubeconfig)
	if !etcdUp || !apiUp {
		return exitError{3}
	}
	return nil
}
