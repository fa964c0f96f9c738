#pragma once
// Private: connections to the API server (opened close-on-exec, within the request's deadline,
// TLS verified) and the pool of kept-alive ones that requests reuse.

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include "kinformer/client/clock.h"
#include "kinformer/client/result.h"
#include "net.h"
#include "server_url.h"
#include "tls.h"
#include "tls_stream.h"
#include "transport.h"

namespace kinformer::client::detail {

/// One TCP connection, with TLS unless the server is http://. Used on the io thread only.
struct Connection {
  Connection(asio::any_io_executor ex, std::shared_ptr<ssl::context> context);
  /// The TCP stream (under TLS, if any): connecting, the socket.
  beast::tcp_stream& lowest() { return tls ? tls->next_layer() : *plain; }
  /// The deadline of the connect and of every read and write from now on; past it they end
  /// with beast::error::timeout.
  void expires_at(std::chrono::steady_clock::time_point deadline) {
    if (tls) {
      tls->expires_at(deadline);
    } else {
      plain->expires_at(deadline);
    }
  }
  void expires_never() {
    if (tls) {
      tls->expires_never();
    } else {
      plain->expires_never();
    }
  }
  /// Calls `f` with the stream requests go over (the TLS stream, or the plain TCP one) and
  /// returns what it returns: one call for both kinds, so no caller picks the stream itself.
  template <class F>
  decltype(auto) with_stream(F&& f) {
    return tls ? f(*tls) : f(*plain);
  }
  /// Bytes already decrypted and waiting in the TLS layer (0 for plain TCP): data the socket's
  /// own count does not show.
  [[nodiscard]] std::size_t tls_pending() const {
    return tls ? static_cast<std::size_t>(SSL_pending(tls->native_handle())) : 0;
  }
  /// Ends the read or write in progress with asio::error::operation_aborted (under TLS, also one
  /// between two waits for the socket), and those started before uncancel().
  void cancel() {
    if (tls) {
      tls->cancel();
    } else {
      error_code ignored;
      plain->socket().cancel(ignored);
    }
  }
  void uncancel() {
    if (tls) tls->uncancel();
  }
  /// Closes the socket; the deadline is disarmed.
  void close();

  std::shared_ptr<ssl::context> ctx;  // outlives tls
  std::optional<TlsStream> tls;
  std::optional<beast::tcp_stream> plain;
  beast::flat_buffer buffer;
  std::string cert_id;          ///< the client certificate it was opened with ("0": none)
  bool http2 = false;           ///< the server chose "h2" by ALPN (Connector::connect)
  Clock::TimePoint idle_since;  ///< when it went back to the pool
};

using ConnectionPtr = std::shared_ptr<Connection>;

/// Opens connections: resolves the host within the deadline, connects on a close-on-exec socket,
/// then (TLS) verifies the server and handshakes. Used on the io thread only.
class Connector {
 public:
  Connector(const ServerUrl& url, const TlsSettings& tls) : url_(url), tls_(tls) {}
  /// `offer_h2`: a TLS connection offers "h2" and "http/1.1" by ALPN, and says which the
  /// server chose (Connection::http2); else it offers none, and the server speaks HTTP/1.1.
  awaitable<Result<ConnectionPtr>> connect(std::shared_ptr<ssl::context> context,
                                           std::size_t cert_id,
                                           std::chrono::steady_clock::time_point deadline,
                                           bool offer_h2 = false);

 private:
  awaitable<Result<tcp::resolver::results_type>> resolve(
      asio::any_io_executor ex, std::chrono::steady_clock::time_point deadline);
  const ServerUrl& url_;
  const TlsSettings& tls_;
};

/// Request/response exchanges over kept-alive connections (at most `max_idle` kept, each for at
/// most `idle_timeout` of `clock`'s time). A kept connection is reused only if it has nothing
/// to read (an idle HTTP/1.1 connection that has is closed or closing). A reused connection
/// that fails before any response byte arrived means the server went away: every kept
/// connection is closed, and GET, HEAD and OPTIONS only are retried once, on a new connection.
/// With a `sink`, a 2xx body it accepts is streamed to it (transport.h, BodySink); the retry
/// then also requires that no body byte reached the sink; a failing sink closes the
/// connection. Used on the io thread only.
class ConnectionPool {
 public:
  ConnectionPool(Connector& connector, std::size_t max_idle, Clock::Duration idle_timeout,
                 ClockPtr clock, std::size_t max_response_bytes)
      : connector_(connector),
        max_idle_(max_idle),
        idle_timeout_(idle_timeout),
        clock_(std::move(clock)),
        max_response_bytes_(max_response_bytes) {}
  awaitable<Result<HttpResponse>> request(http::request<http::string_body> req,
                                          std::shared_ptr<ssl::context> context,
                                          std::size_t cert_id,
                                          std::chrono::steady_clock::time_point deadline,
                                          const BodySink* sink = nullptr);
  /// Closes every kept connection.
  void close_all();

 private:
  /// The newest kept connection for this certificate and context that is still usable (idle
  /// less than idle_timeout_, nothing to read); the ones passed over are closed. Null if none.
  ConnectionPtr take_idle(const std::string& cert_id, const std::shared_ptr<ssl::context>& context);

  Connector& connector_;
  const std::size_t max_idle_;
  const Clock::Duration idle_timeout_;
  const ClockPtr clock_;
  const std::size_t max_response_bytes_;
  std::vector<ConnectionPtr> idle_;
};

}  // namespace kinformer::client::detail
