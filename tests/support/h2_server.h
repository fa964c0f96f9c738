#pragma once
// H2TestServer: an in-process, scripted HTTP/2 server (RFC 9113) for deterministic protocol tests
// of the client's HTTP/2 transport. TLS only, with ALPN "h2" (the client speaks HTTP/2 only over
// TLS), on 127.0.0.1 with an ephemeral port. One thread accepts; each connection has a thread of
// its own that owns its socket and TLS state.
//
// It frames, decodes and checks what the client sends with the client's own framing and HPACK
// code (client/src/http2), so a test including this header needs client/src on its include path
// (tests/client has it). The HTTP/1.1 fallback is tested with FakeApiServer, which offers no ALPN.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "certs.h"
#include "http2/frame.h"
#include "kinformer/client/cluster_config.h"

namespace kinformer::testing {

/// One request the client sent on a stream: its pseudo-header fields, its regular fields in
/// order, and its body (from its DATA frames).
struct H2Request {
  /// The connection it came on, numbered from 1 in the order the server accepted them.
  std::uint64_t connection = 0;
  std::uint32_t stream_id = 0;
  std::string method;     ///< :method
  std::string path;       ///< :path, with the query, as sent
  std::string authority;  ///< :authority ("" when absent)
  std::string scheme;     ///< :scheme
  /// The regular fields (no pseudo-headers), as sent: names lower case, as HTTP/2 requires.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  /// The first field named `name` (matched case-insensitively), "" when absent.
  [[nodiscard]] std::string header(std::string_view name) const;
};

/// A response body the test drives (a watch): create it, return it from a handler in an H2Reply,
/// then send() bytes and end() or reset(). Calls made before the server attached it to its
/// stream are queued, so a handler may also return a fully scripted stream.
///
/// The server sends the bytes as DATA frames of at most the client's SETTINGS_MAX_FRAME_SIZE and
/// only within the flow-control windows (the stream's: the client's SETTINGS_INITIAL_WINDOW_SIZE
/// plus its WINDOW_UPDATEs for the stream; the connection's: 65,535 plus its WINDOW_UPDATEs on
/// stream 0). What does not fit waits for a WINDOW_UPDATE.
///
/// Thread-safety: every member may be called from any thread.
/// Lifetime: may outlive the server; once the stream is over (closed()), calls are no-ops.
class H2Stream {
 public:
  H2Stream() = default;
  H2Stream(const H2Stream&) = delete;
  H2Stream& operator=(const H2Stream&) = delete;

  /// Queues `bytes` of the body (empty bytes are ignored; nothing after end() or reset()).
  void send(std::string bytes);
  /// Ends the body (END_STREAM) once every queued byte was sent.
  void end();
  /// Resets the stream (RST_STREAM with `code`) at once: bytes still queued are dropped.
  void reset(client::detail::ErrorCode code);

  /// The stream's id; 0 until the server attached it.
  [[nodiscard]] std::uint32_t id() const;
  /// Waits until the server sent the response's HEADERS; false on timeout (or if the stream
  /// was over first).
  bool wait_started(std::chrono::milliseconds timeout) const;
  /// DATA payload bytes framed for the connection so far (within the windows; they are written
  /// to the socket by the connection's thread right after).
  [[nodiscard]] std::size_t bytes_sent() const;
  /// Bytes given to send() and not sent yet (waiting for the windows, or for the server).
  [[nodiscard]] std::size_t bytes_queued() const;
  /// Waits until bytes_sent() >= n; false on timeout.
  bool wait_sent(std::size_t n, std::chrono::milliseconds timeout) const;
  /// Waits until flow control holds bytes back: some are queued and the stream's or the
  /// connection's window is used up; false on timeout.
  bool wait_blocked(std::chrono::milliseconds timeout) const;
  /// The sum of the client's WINDOW_UPDATE increments for this stream. An increment is counted
  /// once the server sent what it allowed.
  [[nodiscard]] std::uint64_t window_updates() const;
  /// Waits until window_updates() >= at_least; false on timeout.
  bool wait_window_updates(std::uint64_t at_least, std::chrono::milliseconds timeout) const;
  /// The code of the client's RST_STREAM for this stream, if it sent one.
  [[nodiscard]] std::optional<client::detail::ErrorCode> client_reset() const;
  /// Waits until the client reset the stream; false on timeout.
  bool wait_client_reset(std::chrono::milliseconds timeout) const;
  /// True once the stream is over: END_STREAM or RST_STREAM sent, reset by the client, the
  /// connection gone, or the server destroyed.
  [[nodiscard]] bool closed() const;
  /// Waits until closed(); false on timeout.
  bool wait_closed(std::chrono::milliseconds timeout) const;

 private:
  friend class H2TestServer;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::string queue_;                                       // guarded by mu_: not sent yet
  bool end_requested_ = false;                              // guarded by mu_
  std::optional<client::detail::ErrorCode> reset_request_;  // guarded by mu_
  std::function<void()> wake_;        // guarded by mu_: set while attached; called under mu_
  std::uint32_t id_ = 0;              // guarded by mu_
  bool attached_ = false;             // guarded by mu_: a reply took it (a stream serves one reply)
  bool started_ = false;              // guarded by mu_
  bool closed_ = false;               // guarded by mu_
  bool blocked_ = false;              // guarded by mu_
  std::size_t bytes_sent_ = 0;        // guarded by mu_
  std::uint64_t window_updates_ = 0;  // guarded by mu_
  std::optional<client::detail::ErrorCode> client_reset_;  // guarded by mu_
};

/// A handler's answer: a complete response, a streamed one (`stream` set), or a reset.
struct H2Reply {
  int status = 200;
  /// Response fields (names are sent lower case). A non-streaming reply gets a content-length
  /// unless it has one (or its status has no body).
  std::vector<std::pair<std::string, std::string>> headers;
  /// A non-streaming reply's body: HEADERS, then DATA frames with END_STREAM on the last, within
  /// the windows; HEADERS with END_STREAM when it is empty.
  std::string body;
  /// When set, the body comes from this stream (`body` is ignored).
  std::shared_ptr<H2Stream> stream;
  /// When set, the server answers with RST_STREAM and this code instead of a response.
  std::optional<client::detail::ErrorCode> reset;

  /// A JSON body (content-type: application/json).
  static H2Reply json(std::string body, int status = 200);
  /// A metav1.Status failure body, as Reply::api_status makes it.
  static H2Reply api_status(int code, std::string reason, std::string message);
  /// A JSON stream (a watch): content-type application/json, the body from `stream`.
  static H2Reply streaming(std::shared_ptr<H2Stream> stream, int status = 200);
  /// No response: RST_STREAM with `code`.
  static H2Reply reset_stream(client::detail::ErrorCode code);
};

using H2Handler = std::function<H2Reply(const H2Request&)>;

struct H2TestServerOptions {
  /// SETTINGS_MAX_CONCURRENT_STREAMS in the server's SETTINGS (kube-apiserver's default is
  /// 1000); unset: not sent (unlimited). Streams past it get RST_STREAM REFUSED_STREAM.
  std::optional<std::uint32_t> max_concurrent_streams = 1000;
  /// SETTINGS_HEADER_TABLE_SIZE in the server's SETTINGS: the most the client's HPACK encoder
  /// may use once it acknowledged them; unset: not sent (4096).
  std::optional<std::uint32_t> header_table_size;
  /// Whether the server answers the client's PINGs (see set_answer_pings).
  bool answer_pings = true;
  /// Reject clients without a certificate signed by pki.ca.
  bool require_client_cert = false;
  /// The certificates to serve; unset = make_pki().
  std::optional<Pki> pki;
};

/// Per connection, in order: the TLS handshake (a client that does not offer ALPN "h2" is an
/// error), the server's SETTINGS, the client's preface and SETTINGS (acknowledged), then
/// requests. Each complete request (its header block, and its DATA up to END_STREAM) goes to the
/// handler registered for its method and path, on the connection's thread; unregistered ones
/// get a 404 Status.
///
/// What the client sends is checked as RFC 9113 requires of a server (frames, stream states,
/// flow control, request header fields). A connection error is answered with GOAWAY and closes
/// the connection; a stream error with RST_STREAM. Both are recorded in errors(), with what was
/// wrong: tests of a correct client expect it empty.
///
/// Connections are numbered from 1 in the order the server accepted them (also those whose
/// handshake failed). Observers of an unknown connection return zeros; controls throw
/// std::invalid_argument.
///
/// Thread-safety: every member may be called from any thread. Handlers run on their
/// connection's thread: a handler that blocks stalls that connection only. Handlers must return
/// for the destructor to.
/// Lifetime: the destructor stops the server and closes every connection (no GOAWAY);
/// H2Streams may outlive it.
class H2TestServer {
 public:
  explicit H2TestServer(H2TestServerOptions options = {});
  ~H2TestServer();
  H2TestServer(const H2TestServer&) = delete;
  H2TestServer& operator=(const H2TestServer&) = delete;

  /// "https://127.0.0.1:PORT".
  [[nodiscard]] std::string url() const;
  [[nodiscard]] std::uint16_t port() const;
  [[nodiscard]] const Pki& pki() const { return pki_; }
  /// A ClusterConfig for this server: its URL, its CA, and `credentials` (for a server requiring
  /// client certificates, pass the pki().client certificate).
  [[nodiscard]] client::ClusterConfig cluster_config(
      client::CredentialsProviderPtr credentials = nullptr) const;

  /// Registers `handler` for `method` and `path` (the :path without its query: exact, or a
  /// prefix when `path` ends in '*'). Later registrations win.
  void on(std::string method, std::string path, H2Handler handler);

  // --- the whole server ---

  /// Connections that completed the TLS handshake with ALPN h2.
  [[nodiscard]] std::uint64_t connections() const;
  bool wait_connections(std::uint64_t n, std::chrono::milliseconds timeout) const;
  /// Every request handled so far (recorded once its response's HEADERS are framed), oldest
  /// first. Refused streams are not requests.
  [[nodiscard]] std::vector<H2Request> requests() const;
  bool wait_requests(std::size_t n, std::chrono::milliseconds timeout) const;
  /// Protocol errors found in what clients sent, e.g. "connection 1: connection error
  /// PROTOCOL_ERROR: ...", "connection 1: stream 3: stream error ...".
  [[nodiscard]] std::vector<std::string> errors() const;
  /// Streams refused with RST_STREAM REFUSED_STREAM: past max_concurrent_streams, or above a
  /// GOAWAY's last stream id.
  [[nodiscard]] std::size_t refused_streams() const;
  /// Waits until `condition` (which may call this server's observers) holds; false on timeout.
  /// It is checked again whenever the server's recorded state changes.
  bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout) const;

  // --- one connection ---

  /// Frames of `type` received (all of them, ACKs included, and those found wrong).
  [[nodiscard]] std::size_t frames_received(std::uint64_t connection,
                                            client::detail::FrameType type) const;
  /// The last value the client's SETTINGS gave `id` (unknown ids too), if any.
  [[nodiscard]] std::optional<std::uint32_t> client_setting(std::uint64_t connection,
                                                            client::detail::SettingId id) const;
  /// SETTINGS frames with ACK the client sent (the server sends one SETTINGS frame).
  [[nodiscard]] std::size_t settings_acks(std::uint64_t connection) const;
  /// The sum of the client's WINDOW_UPDATE increments on stream 0.
  [[nodiscard]] std::uint64_t connection_window_updates(std::uint64_t connection) const;
  /// The sum of the client's WINDOW_UPDATE increments for `stream_id`.
  [[nodiscard]] std::uint64_t stream_window_updates(std::uint64_t connection,
                                                    std::uint32_t stream_id) const;
  /// The code of the client's RST_STREAM for `stream_id`, if it sent one.
  [[nodiscard]] std::optional<client::detail::ErrorCode> client_reset(
      std::uint64_t connection, std::uint32_t stream_id) const;
  /// Streams the client opened that are not over (neither side reset it, and not both ended).
  [[nodiscard]] std::size_t open_streams(std::uint64_t connection) const;
  /// PINGs (without ACK) the client sent, answered or not.
  [[nodiscard]] std::size_t client_pings(std::uint64_t connection) const;
  bool wait_client_pings(std::uint64_t connection, std::size_t n,
                         std::chrono::milliseconds timeout) const;
  /// PING ACKs the client sent: answers to ping().
  [[nodiscard]] std::size_t ping_acks(std::uint64_t connection) const;
  /// True while the connection's thread serves it (false before its handshake too).
  [[nodiscard]] bool connection_open(std::uint64_t connection) const;
  /// Waits until the server read the client's end of the connection (close_notify, EOF or a
  /// reset), also after the server itself began closing it; false on timeout.
  bool wait_connection_closed(std::uint64_t connection, std::chrono::milliseconds timeout) const;

  // --- controls ---

  /// Whether the server answers the client's PINGs from now on (they are counted either way).
  void set_answer_pings(bool answer);
  /// Sends GOAWAY. From then on the connection refuses new streams above `last_stream_id`
  /// (RST_STREAM REFUSED_STREAM, counted in refused_streams()), goes on serving the streams it
  /// has, and closes (close_notify, then TCP) once none is open; at once if none is.
  void goaway(std::uint64_t connection, std::uint32_t last_stream_id,
              client::detail::ErrorCode code, std::string debug_data = {});
  /// Cuts the TCP connection at once: no GOAWAY, no close_notify.
  void close(std::uint64_t connection);
  /// Sends a PING (an ACK from the client counts in ping_acks()).
  void ping(std::uint64_t connection);

  struct Impl;

 private:
  Pki pki_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kinformer::testing
