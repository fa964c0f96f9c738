// Package kube builds the peers' rest configs and clientsets: client-go v0.36 defaults, with the
// content type set explicitly (protobuf for built-in types, as kube components and client-go's
// generated clients ask for it, unless a benchmark asks for JSON).
package kube

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Encoding: the content type a config asks for.
type Encoding string

const (
	Protobuf Encoding = "protobuf"
	JSON     Encoding = "json"
)

// Config reads kubeconfig and sets ContentType and AcceptContentTypes for enc.
func Config(kubeconfig string, enc Encoding) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	switch enc {
	case Protobuf:
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	case JSON:
		cfg.ContentType = "application/json"
		cfg.AcceptContentTypes = "application/json"
	default:
		return nil, fmt.Errorf("unknown encoding %q (protobuf, json)", enc)
	}
	return cfg, nil
}

// RequireLoopback fails unless cfg's server is on a loopback address: the peers that write
// objects never write to anything else.
func RequireLoopback(cfg *rest.Config) error {
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return fmt.Errorf("server %q: %v", cfg.Host, err)
	}
	if ip := net.ParseIP(u.Hostname()); u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("server %s is not on a loopback address; refusing to write to it", cfg.Host)
	}
	return nil
}

// WriterClient is the clientset of a loader (not the measured client): protobuf, a loopback
// server only, no client-side rate limit, 30 s per request.
func WriterClient(kubeconfig, userAgent string) (*kubernetes.Clientset, error) {
	cfg, err := Config(kubeconfig, Protobuf)
	if err != nil {
		return nil, err
	}
	if err := RequireLoopback(cfg); err != nil {
		return nil, err
	}
	cfg.QPS = -1
	cfg.Timeout = 30 * time.Second
	cfg.UserAgent = userAgent
	return kubernetes.NewForConfig(cfg)
}

// StripManagedFields is the transform client-go users install to drop managedFields before
// objects are cached (kinformer's codecs never keep them).
func StripManagedFields(obj interface{}) (interface{}, error) {
	if a, err := meta.Accessor(obj); err == nil {
		a.SetManagedFields(nil)
	}
	return obj, nil
}

// Shutdown calls f.Shutdown and waits for it at most d; false when it did not return in time.
func Shutdown(f informers.SharedInformerFactory, d time.Duration) bool {
	done := make(chan struct{})
	go func() { f.Shutdown(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// EnsureNamespace creates namespace name unless it exists.
func EnsureNamespace(ctx context.Context, cs kubernetes.Interface, name string) error {
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}
