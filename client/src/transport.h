#pragma once
// Private: HTTP/1.1 over TCP or TLS (Boost.Beast, OpenSSL) on one strand of an IoRuntime, with a
// small keep-alive pool and streaming watch responses. Keeps Asio/Beast out of public headers.

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kinformer/client/clock.h"
#include "kinformer/client/cluster_config.h"
#include "kinformer/client/io_runtime.h"
#include "kinformer/client/resource.h"
#include "kinformer/client/result.h"
#include "kinformer/client/watch.h"

namespace kinformer::client::detail {

struct HttpRequest {
  std::string method = "GET";
  std::string target;  ///< path and query, without the server's path prefix
  std::string body;
  std::string content_type;
  std::string accept = "application/json";
  /// Watch only: the read-idle deadline (0: TransportOptions::watch_idle_timeout, else derived
  /// from the request's timeoutSeconds).
  std::chrono::milliseconds idle_timeout{0};
};

struct HttpResponse {
  int status = 0;
  std::string body;  ///< empty when body_streamed; decoded when it arrived gzip-encoded
  /// The Content-Encoding the body arrived in ("gzip"), empty when none. A gzip-encoded body is
  /// decoded before anyone sees it (`body`, a BodySink), and `headers` then name no
  /// Content-Encoding or Content-Length.
  std::string content_encoding;
  std::vector<std::pair<std::string, std::string>> headers;
  /// The body went to a BodySink (it accepted this 2xx response) instead of `body`.
  bool body_streamed = false;
};

/// Receives a 2xx response body piece by piece as it arrives (Transport::request), so that a
/// large body (a LIST) is decoded while it downloads and is never held whole.
/// Threading: both functions run on the transport's io thread while request() waits for them
/// on the calling thread, one call at a time and never after request() returned: state they
/// share with the caller needs no lock (the promise/future hand-off orders it).
struct BodySink {
  /// Sees the head of a 2xx response (status, headers; body empty) before any body byte and
  /// chooses: true streams the body to `piece`; false buffers it into HttpResponse::body, as
  /// without a sink. Non-2xx responses (Status bodies, small) are always buffered, so error
  /// mapping, Retry-After and the 401 retry see them as before. Called at most once per
  /// request() unless the stale-connection retry resends it, which happens only when nothing
  /// of the response (so no head, no body byte) arrived.
  std::function<bool(const HttpResponse& head)> accept;
  /// One piece of the body, in order (the total is bounded by max_response_bytes). An error
  /// aborts the request: the connection is closed (never reused) and request() returns the
  /// error as it is. The body's end is request() returning the response (body_streamed set).
  /// A std::exception thrown by `accept` or `piece` aborts it the same way, as an Errc::decode
  /// error naming the request, where in the body it was thrown and the exception's what().
  std::function<Status(std::string_view piece)> piece;
};

/// Filled field by field from RestClientOptions, which documents every field and holds the
/// defaults (one place, so they cannot drift apart).
struct TransportOptions {
  std::string user_agent;
  std::chrono::milliseconds request_timeout{};
  std::size_t max_idle_connections = 0;
  std::chrono::milliseconds idle_connection_timeout{};
  ClockPtr clock;  ///< null: system_clock()
  std::size_t max_response_bytes = 0;
  std::size_t max_watch_event_bytes = 0;
  std::size_t watch_queue_limit = 0;
  std::size_t watch_queue_bytes_limit = 0;
  std::chrono::milliseconds watch_idle_timeout{};  ///< 0: derived from the request
  bool accept_gzip = false;  ///< GET requests other than watches say Accept-Encoding: gzip
  bool http2 = false;        ///< watches share HTTP/2 connections where the server offers h2
  std::chrono::milliseconds http2_read_idle_timeout{};
  std::chrono::milliseconds http2_ping_timeout{};
  IoRuntimePtr runtime;  ///< null: a runtime of one thread of the transport's own
};

/// Thread-safety: request() and watch() may be called from any thread except the runtime's.
/// Everything of one transport runs on one strand of its runtime, so it is never run by two
/// threads at once, also on a runtime shared by many transports.
class Transport : public std::enable_shared_from_this<Transport> {
 public:
  /// Throws ConfigError for a bad server URL or CA bundle.
  static std::shared_ptr<Transport> create(const ClusterConfig& config, TransportOptions options);
  // NOLINTNEXTLINE(bugprone-exception-escape): only bad_alloc can escape: terminate
  ~Transport();

  /// One request/response exchange with a deadline; connections are reused.
  Result<HttpResponse> request(const HttpRequest& request, const Credentials& credentials);
  /// The same, with a 2xx body streamed to `sink` when it accepts it (see BodySink); null:
  /// buffered. The deadline covers the whole exchange, the sink's work included.
  Result<HttpResponse> request(const HttpRequest& request, const Credentials& credentials,
                               const BodySink* sink);

  /// Opens a streaming request: on a stream of a shared HTTP/2 connection (TransportOptions::http2
  /// and a server that chooses h2), else on a connection of its own. On HTTP 200 returns the stream
  /// (decoding with `codec`); otherwise the mapped API error. `on_headers` sees the response
  /// headers (status set, body empty) before this returns.
  Result<WatchStreamPtr> watch(const HttpRequest& request, const Credentials& credentials,
                               std::shared_ptr<const Codec> codec,
                               const std::function<void(const HttpResponse&)>& on_headers);

  /// HTTP/2 connections open now (for tests).
  std::size_t http2_connections();

  struct Impl;

 private:
  Transport() = default;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kinformer::client::detail
