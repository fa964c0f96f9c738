#pragma once
// RestClient: synchronous, thread-safe calls to one API server plus streaming watches.

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kinformer/client/clock.h"
#include "kinformer/client/cluster_config.h"
#include "kinformer/client/io_runtime.h"
#include "kinformer/client/log.h"
#include "kinformer/client/rate_limiter.h"
#include "kinformer/client/resource.h"
#include "kinformer/client/result.h"
#include "kinformer/client/watch.h"

namespace kinformer::client {

/// A deprecation or other `Warning:` header the server attached to a response.
struct ApiWarning {
  std::string resource;  ///< GroupVersionResource::to_string(), or the raw path for get_raw
  std::string message;   ///< the warning text, e.g. "v1 Endpoints is deprecated in v1.33+; ..."
  bool operator==(const ApiWarning&) const = default;
};

struct RestClientOptions {
  /// User-Agent header; name the embedding component, e.g. "mesh-pilot/1.2 (kinformer/0.1)".
  std::string user_agent = "kinformer/0.1";
  /// Non-watch requests are limited by this bucket (defaults: 5 QPS, burst 10, like client-go).
  RateLimiter::Options rate_limit{};
  /// Optional shared limiter (e.g. one per process); overrides rate_limit when set.
  std::shared_ptr<RateLimiter> rate_limiter;
  /// Deadline of each non-watch request (connect, TLS, send, complete response) and of a watch's
  /// connect and response headers.
  std::chrono::milliseconds request_timeout{30000};
  /// Idle keep-alive connections kept for reuse.
  std::size_t max_idle_connections = 4;
  /// A kept-alive connection idle this long is closed instead of reused (0: none is reused).
  /// Below the API server's own idle timeout (kube-apiserver closes connections idle for 90 s),
  /// so that no request goes out on a connection the server is closing at that moment: a POST,
  /// PUT, PATCH or DELETE lost that way is not retried.
  std::chrono::milliseconds idle_connection_timeout{60000};
  /// Measures how long kept-alive connections have been idle. Null: system_clock(). Request
  /// deadlines and watch timeouts always run on the steady clock.
  ClockPtr clock;
  /// Largest accepted non-watch response body.
  std::size_t max_response_bytes = std::size_t{256} << 20;
  /// Largest accepted watch event (Errc::too_large beyond).
  std::size_t max_watch_event_bytes = std::size_t{16} << 20;
  /// Largest accepted item of a list response (Errc::too_large beyond). Lists are decoded
  /// item by item as they arrive (JsonListDecoder, ProtobufListDecoder): beside the decoded
  /// objects, a list holds about one item's bytes, never the whole body.
  std::size_t max_list_item_bytes = std::size_t{16} << 20;
  /// Events a watch buffers ahead of its reader before it stops reading from the socket.
  std::size_t watch_queue_limit = 4096;
  /// The same bound in bytes (the events' JSON lines as received): a watch stops reading once
  /// its buffered events reach either bound (4096 events of 1.5 MiB would be 6 GiB), and
  /// resumes when the reader has taken them below half of both. One read's events are always
  /// taken, so memory may exceed it by one read (at most 64 KiB plus one event).
  std::size_t watch_queue_bytes_limit = std::size_t{64} << 20;
  /// Read-idle deadline of a watch once its response headers arrived: when no byte arrives for
  /// this long, WatchStream::next() returns Errc::timeout and the connection is closed (a peer
  /// that died without FIN/RST would otherwise hang the watch forever). 0 = derive it from the
  /// request: timeoutSeconds + 60 s when the watch has timeoutSeconds, else 10 min (the server
  /// sends a bookmark about once a minute with allowWatchBookmarks and ends a watch at
  /// timeoutSeconds, so longer silence means a dead peer).
  std::chrono::milliseconds watch_idle_timeout{0};
  /// Called once per distinct (resource, warning message) among those remembered, from the
  /// calling thread. Null: each goes to `log` as a warn record (as client-go logs them).
  std::function<void(const ApiWarning&)> on_warning;
  /// Where the client's log lines go (see log.h). Null: logfmt lines on stderr. Server
  /// warnings, already de-duplicated, are limited to 100 at once, then one per second.
  LogSink log;
  /// Distinct (resource, warning message) pairs remembered for de-duplication and warnings()
  /// (get_raw keys warnings by path, so a fixed cap keeps them from growing forever). Beyond it
  /// the oldest is forgotten, and reported again should it recur. Values below 1 count as 1.
  std::size_t max_remembered_warnings = 1024;
  /// Lists and watches of the built-in typed resources (Pod, Secret, Endpoints, EndpointSlice)
  /// ask for Kubernetes' protobuf encoding first and JSON second, and decode the response by
  /// its Content-Type (a server or proxy answering JSON is understood as well). false: they ask
  /// for JSON only. Dynamic objects and custom resources (JSON only on the server), get() and
  /// writes always use JSON. docs/protobuf.md.
  bool protobuf = true;
  /// GET requests (lists, get(), get_raw()) say `Accept-Encoding: gzip`, and a gzip-encoded
  /// body is decoded as it arrives, checked (CRC-32, length) and bounded by max_response_bytes
  /// once decoded. kube-apiserver compresses responses over 128 KiB (gzip level 1): a LIST of
  /// 20,000 Pods is 46 MB in protobuf and 1.6 MB gzipped. Watches are never compressed. client-go
  /// asks for gzip too (Go's transport; `rest.Config.DisableCompression` turns it off). false:
  /// no Accept-Encoding is sent (a gzip-encoded body is still decoded). docs/gzip.md.
  bool gzip = true;
  /// Watches share HTTP/2 connections: over TLS, a watch's connection offers "h2" by ALPN, and
  /// when the server chooses it (kube-apiserver does) every watch of this client with the same
  /// client certificate goes as a stream on it, up to the server's stream limit (then a second
  /// connection), as client-go's watches do. Each watch then holds a stream, not a connection
  /// of its own. A server that chooses HTTP/1.1 gets a connection per watch, as with false.
  /// Requests other than watches use the HTTP/1.1 keep-alive pool either way. docs/http2.md.
  bool http2 = true;
  /// An HTTP/2 connection on which nothing arrived for this long is sent a PING, and closed
  /// (its watches fail and reconnect) when nothing arrives within http2_ping_timeout after it:
  /// a dead peer or path is found within both, whatever the watches' own idle deadlines.
  /// client-go's values (its ReadIdleTimeout and PingTimeout).
  std::chrono::milliseconds http2_read_idle_timeout{30000};
  std::chrono::milliseconds http2_ping_timeout{15000};
  /// The threads this client's network I/O runs on. Null: a runtime of one thread of the
  /// client's own. Clients given one runtime share its threads (each client's work runs on a
  /// strand of its own, so one client's connections are never handled by two threads at once):
  /// a process with many clusters holds the runtime's threads, not one per client.
  IoRuntimePtr runtime;
};

/// A raw HTTP response (get_raw).
struct RawResponse {
  int status = 0;
  /// Always decoded: a gzip-encoded body (RestClientOptions::gzip) arrives here decompressed,
  /// and `headers` then carry no Content-Encoding or Content-Length.
  std::string body;
  /// The Content-Encoding the body arrived in ("gzip"); empty when it was not encoded.
  std::string content_encoding;
  std::vector<std::pair<std::string, std::string>> headers;
  /// First header named `name` (case-insensitive); "" when absent.
  [[nodiscard]] std::string header(std::string_view name) const;
};

/// Content types for RestClient::patch.
enum class PatchType {
  merge,            ///< application/merge-patch+json (RFC 7386)
  json,             ///< application/json-patch+json (RFC 6902)
  strategic_merge,  ///< application/strategic-merge-patch+json (built-in types only)
};

/// Talks to one API server. The public API is synchronous: each call blocks its caller while
/// the request runs on the client's runtime (RestClientOptions::runtime: its own io thread by
/// default; Boost.Beast, C++20 coroutines). Never call it from a thread of that runtime (i.e.
/// never from inside a coroutine of a client on it); such a call fails with Errc::network
/// instead of deadlocking.
/// Thread-safety: thread-safe; no concurrent call causes a data race.
/// Lifetime: watch streams and lister-watchers keep the client's internals (and its runtime)
/// alive; an own runtime's thread stops when the RestClient and all of them are gone. The
/// last of them to go waits for the client's I/O still winding down (a cancelled watch read:
/// at once; a connect in progress: at most request_timeout; with a runtime of its own, also a
/// name resolution the system resolver has not returned yet).
class RestClient {
 public:
  /// Throws ConfigError for an unusable configuration (bad server URL, unparsable CA PEM).
  explicit RestClient(ClusterConfig config, RestClientOptions options = {});
  ~RestClient();
  RestClient(const RestClient&) = delete;
  RestClient& operator=(const RestClient&) = delete;

  Result<ObjectPtr> get(const ResourceType& type, std::string_view ns, std::string_view name);
  /// One page (options.limit / options.continue_token).
  Result<ObjectList> list(const ResourceType& type, std::string_view ns,
                          const ListOptions& options = {});
  /// Every page, following continue tokens (page size options.limit; 0 = 500). An expired
  /// continue token (410) restarts the list from scratch once; a second expiry is returned.
  Result<ObjectList> list_all(const ResourceType& type, std::string_view ns,
                              ListOptions options = {});
  /// POST to the object's namespace (metadata.namespace_).
  Result<ObjectPtr> create(const ResourceType& type, const Object& object);
  /// PUT to the object's name (metadata.resource_version is the optimistic-concurrency guard).
  Result<ObjectPtr> update(const ResourceType& type, const Object& object);
  Result<ObjectPtr> patch(const ResourceType& type, std::string_view ns, std::string_view name,
                          PatchType patch_type, std::string_view patch);
  Status delete_(const ResourceType& type, std::string_view ns, std::string_view name);
  /// GET of any path ("/metrics", "/readyz?verbose"): any status is returned as a value; only
  /// transport failures are errors.
  Result<RawResponse> get_raw(std::string_view path_and_query);

  /// Opens a watch (watch=1 is added). Errors of the HTTP response (403, 410, 429 ...) are
  /// returned here; later failures come from WatchStream::next().
  Result<WatchStreamPtr> watch(const ResourceType& type, std::string_view ns,
                               const ListOptions& options);
  /// A ListerWatcher for one resource in `ns` ("" = all namespaces) sharing this client.
  ListerWatcherPtr lister_watcher(ResourceType type, std::string ns);

  /// The distinct warnings remembered (the last max_remembered_warnings), in arrival order.
  [[nodiscard]] std::vector<ApiWarning> warnings() const;
  /// Fails requests waiting for a rate-limiter token, and every later request and watch open
  /// (also through lister-watchers), with Errc::cancelled, so an owner shutting down is not held
  /// up by the limiter. A request already sent finishes within request_timeout; open watch
  /// streams are not touched (cancel or destroy them). Idempotent; the destructor does not call
  /// it (lister-watchers may outlive the client).
  void shutdown();
  [[nodiscard]] const ClusterConfig& config() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

/// The query string (without '?') for `options`, percent-encoded; `watch` adds watch=1 and the
/// watch-only parameters.
std::string list_query(const ListOptions& options, bool watch);

/// The message of a `Warning:` header value ("299 - \"text\""), or the raw value if it does not
/// have that shape.
std::string parse_warning_header(std::string_view value);

}  // namespace kinformer::client
