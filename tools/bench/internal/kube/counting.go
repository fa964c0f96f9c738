package kube

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// Request is one request a Counter saw.
type Request struct {
	UnixNS     int64  // when its response (or error) came back, wall clock
	Kind       string // "list" (anything not a watch), "watch" or "watchlist" (sendInitialEvents=true)
	Collection bool   // a GET whose path ends in "s" (a list of a collection) that is not a watch
	OK         bool   // no error and a status below 400
}

// Counter is a RoundTripper that logs every request and counts the response body bytes read
// (after the transport's transparent gzip decoding). Install it with Wrap.
type Counter struct {
	next      http.RoundTripper
	bodyBytes atomic.Int64
	mu        sync.Mutex
	log       []Request
}

// Wrap installs a new Counter as cfg's outermost RoundTripper and returns it.
func Wrap(cfg *rest.Config) *Counter {
	c := &Counter{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		c.next = rt
		return c
	})
	return c
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

func (c *Counter) RoundTrip(r *http.Request) (*http.Response, error) {
	q := r.URL.Query()
	e := Request{Kind: "list"}
	if w := q.Get("watch"); w == "1" || w == "true" {
		e.Kind = "watch"
		if q.Get("sendInitialEvents") == "true" {
			e.Kind = "watchlist"
		}
	} else {
		e.Collection = r.Method == http.MethodGet && strings.HasSuffix(strings.TrimSuffix(r.URL.Path, "/"), "s")
	}
	resp, err := c.next.RoundTrip(r)
	e.OK = err == nil && resp.StatusCode < 400
	e.UnixNS = time.Now().UnixNano()
	if err == nil && resp.Body != nil {
		resp.Body = countingBody{resp.Body, &c.bodyBytes}
	}
	c.mu.Lock()
	c.log = append(c.log, e)
	c.mu.Unlock()
	return resp, err
}

// Requests returns a copy of the log.
func (c *Counter) Requests() []Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Request(nil), c.log...)
}

// BodyBytes is the response body bytes read so far.
func (c *Counter) BodyBytes() int64 { return c.bodyBytes.Load() }
