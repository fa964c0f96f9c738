#pragma once
// FakeApiServer: an in-process, scripted HTTP/1.1 server for deterministic protocol tests of the
// client and the informers. Plain HTTP or TLS (optionally requiring a client certificate) on
// 127.0.0.1 with an ephemeral port, served by one thread of its own.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "certs.h"
#include "kinformer/client/cluster_config.h"

namespace kinformer::testing {

/// One received request. Header names are lower case; the query is percent-decoded.
struct Request {
  std::string method;  ///< "GET", "POST", ...
  std::string target;  ///< as sent: path?query
  std::string path;    ///< without the query
  std::map<std::string, std::string> query;
  std::map<std::string, std::string> headers;
  std::string body;
  /// The connection it came on, numbered from 1 in the order the server accepted them.
  std::uint64_t connection = 0;

  /// The header's value ("" when absent); `name` is matched case-insensitively.
  [[nodiscard]] std::string header(std::string_view name) const;
  /// The query parameter's value, or nullopt.
  [[nodiscard]] std::optional<std::string> param(const std::string& name) const;
};

/// A chunked streaming response body driven by the test (a watch). Create it, return it from a
/// handler in a Reply, then send() chunks, and end() or abort(). Calls made before the server
/// picked the stream up are queued, so a handler may also return a fully scripted stream.
/// Thread-safety: every member may be called from any thread.
class ScriptedStream {
 public:
  ScriptedStream() = default;
  ScriptedStream(const ScriptedStream&) = delete;
  ScriptedStream& operator=(const ScriptedStream&) = delete;

  /// Sends `bytes` as exactly one HTTP chunk (empty bytes are ignored).
  void send(std::string bytes);
  /// Writes `bytes` to the connection as they are, in one write, without chunk framing: the
  /// test frames them (e.g. chunks followed by the start of a chunk header the server never
  /// finishes). Counted in bytes_written().
  void send_raw(std::string bytes);
  /// Ends the body cleanly (terminating chunk) and closes the connection.
  void end();
  /// Cuts the connection without the terminating chunk: the client sees a truncated stream.
  void abort();
  /// True once the connection is gone (end/abort done, the client hung up, or the server was
  /// destroyed). To check that the client closed it, use wait_client_closed().
  [[nodiscard]] bool closed() const;
  /// Waits until closed(); false on timeout.
  bool wait_closed(std::chrono::milliseconds timeout) const;
  /// Waits until the server saw the client close the connection while the stream was still
  /// being served (never set by end(), abort() or the server's destructor); false on timeout.
  bool wait_client_closed(std::chrono::milliseconds timeout) const;
  /// True once the server attached the stream to a connection (headers sent).
  bool wait_started(std::chrono::milliseconds timeout) const;
  /// Waits until every chunk sent so far has been written to the socket (a client that stopped
  /// reading stalls this once the kernel's buffers are full); false on timeout.
  bool wait_drained(std::chrono::milliseconds timeout) const;
  /// Body bytes written to the socket so far (chunk framing not counted, except what a test
  /// framed itself in send_raw()).
  [[nodiscard]] std::size_t bytes_written() const;

 private:
  friend class FakeApiServer;
  struct Op {
    enum Kind { data, raw, end, abort } kind;
    std::string bytes;
  };
  void push(Op op);

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::deque<Op> ops_;
  std::function<void()> wake_;  // set by the server while attached; called under mu_
  bool started_ = false;
  bool closed_ = false;
  bool client_closed_ = false;
  bool writing_ = false;  // a data or raw write taken from ops_ is in progress
  std::size_t bytes_written_ = 0;
};

/// Holds a reply back until the test opens it. The server goes on serving other connections
/// meanwhile (a handler that blocked would stall them all), so a test can keep one request in
/// flight while others complete. Thread-safety: open() may be called from any thread.
class ReplyGate {
 public:
  ReplyGate() = default;
  ReplyGate(const ReplyGate&) = delete;
  ReplyGate& operator=(const ReplyGate&) = delete;

  /// Lets the held reply (and any later one through this gate) be sent.
  void open();

 private:
  friend class FakeApiServer;
  std::mutex mu_;
  bool open_ = false;
  std::function<void()> wake_;  // set by the server while a reply waits; called under mu_
};

/// A handler's answer: a complete response, or (when `stream` is set) a chunked stream.
struct Reply {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::shared_ptr<ScriptedStream> stream;
  /// Closes the connection right after sending this (non-streaming) response, without a
  /// `Connection: close` header: the client keeps a connection the server has dropped.
  bool close_after = false;
  /// Closes the connection without answering (the request is recorded): a server that closed a
  /// kept-alive connection just as the request arrived.
  bool drop = false;
  /// When set, the (non-streaming) response is sent only once the gate is open.
  std::shared_ptr<ReplyGate> gate;

  /// A JSON body (Content-Type: application/json).
  static Reply json(std::string body, int status = 200);
  /// A metav1.Status failure body, e.g. api_status(410, "Expired", "too old resource version").
  static Reply api_status(int code, std::string reason, std::string message,
                          std::optional<int> retry_after_seconds = std::nullopt);
  /// A plain-text body.
  static Reply text(std::string body, int status = 200);
  /// A chunked JSON stream (a watch).
  static Reply streaming(std::shared_ptr<ScriptedStream> stream, int status = 200);
  /// No answer: the connection is closed (see `drop`).
  static Reply dropped();
};

using Handler = std::function<Reply(const Request&)>;

struct FakeApiServerOptions {
  bool tls = false;
  /// TLS only: reject clients without a certificate signed by pki.ca.
  bool require_client_cert = false;
  /// TLS only: the certificates to serve; unset = make_pki().
  std::optional<Pki> pki;
};

/// Thread-safety: every member may be called from any thread. Handlers run on the server's
/// thread, one at a time; a handler that blocks stalls the whole server.
/// Lifetime: the destructor stops the server and closes every connection; ScriptedStreams may
/// outlive it (their calls become no-ops).
class FakeApiServer {
 public:
  explicit FakeApiServer(FakeApiServerOptions options = {});
  ~FakeApiServer();
  FakeApiServer(const FakeApiServer&) = delete;
  FakeApiServer& operator=(const FakeApiServer&) = delete;

  /// "http://127.0.0.1:PORT" or "https://127.0.0.1:PORT".
  [[nodiscard]] std::string url() const;
  [[nodiscard]] std::uint16_t port() const;
  /// The certificates in use (TLS only; empty strings for plain HTTP).
  [[nodiscard]] const Pki& pki() const { return pki_; }

  /// Registers `handler` for `method` and `path` (exact path, or a prefix when `path` ends in
  /// '*'). Later registrations win. Unregistered requests get a 404 Status JSON.
  void on(std::string method, std::string path, Handler handler);
  /// Every request received so far (recorded after its handler returned), oldest first.
  [[nodiscard]] std::vector<Request> requests() const;
  [[nodiscard]] std::size_t request_count() const;
  /// Waits until at least `n` requests were received; false on timeout.
  bool wait_for_requests(std::size_t n, std::chrono::milliseconds timeout) const;
  /// Number of currently open client connections.
  [[nodiscard]] std::size_t open_connections() const;
  /// Waits until open_connections() == n; false on timeout.
  bool wait_for_open_connections(std::size_t n, std::chrono::milliseconds timeout) const;

  /// A ClusterConfig for this server: its URL, its CA for TLS, and `credentials` (for a server
  /// requiring client certificates, pass the pki().client certificate).
  [[nodiscard]] client::ClusterConfig cluster_config(
      client::CredentialsProviderPtr credentials = nullptr) const;

  struct Impl;

 private:
  Pki pki_;
  std::unique_ptr<Impl> impl_;
};

/// A ready-made WATCH event line: {"type":TYPE,"object":OBJECT_JSON}\n.
std::string watch_event_line(std::string_view type, std::string_view object_json);

}  // namespace kinformer::testing
