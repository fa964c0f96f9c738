#pragma once
// Private: HTTP/2 connections to the API server (RFC 9113, client side) that carry many watches
// each, and the pool that shares them. A watch on its own HTTP/1.1 connection holds a socket, a
// TLS connection state and a read buffer for as long as it lives; on a shared connection it
// holds a stream: an entry in a map. Why, and what it saves: docs/decisions.md.
//
// What a session does: the preface and SETTINGS exchange, one reader of the connection that
// cuts what it reads into frames and hands each stream its own (header blocks decoded, DATA
// passed on), one writer that sends what the streams and the reader queue, receive flow control
// (each stream's window given back as its owner takes the data, unless the owner holds it: a
// reader far behind), GOAWAY, and liveness: a PING after a silence, the connection given up
// when no answer comes. Everything runs on the transport's strand; nothing here locks.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/steady_timer.hpp>

#include "connection.h"
#include "http2/frame.h"
#include "http2/hpack.h"
#include "kinformer/client/result.h"
#include "net.h"
#include "transport.h"

namespace kinformer::client::detail {

/// The owner of one stream (a watch), told on the strand, in this order: on_head once (the
/// final response's status and headers; informational 1xx responses are skipped), on_data for
/// each DATA frame, on_read_done after a read of the connection that brought the stream data,
/// and on_end once. Nothing after on_end, nor after the owner reset the stream.
class Http2StreamHandler {
 public:
  virtual ~Http2StreamHandler() = default;
  virtual void on_head(HttpResponse head) = 0;
  virtual void on_data(std::string_view data) = 0;
  virtual void on_read_done() = 0;
  /// The stream is over: the server ended it (no error), or it was reset, or the connection
  /// failed or closed. `unprocessed`: the server says it did not process the request (a GOAWAY
  /// that leaves the stream out, or REFUSED_STREAM), so it is safe to send again.
  virtual void on_end(std::optional<Error> error, bool unprocessed) = 0;
};

struct Http2SessionOptions {
  /// Each stream's receive window (SETTINGS_INITIAL_WINDOW_SIZE): what the server may send a
  /// stream ahead of its owner, so what a held stream may still receive.
  std::uint32_t stream_window = std::uint32_t{1} << 20;
  /// The connection's receive window. Data is handed to the streams as it arrives, so this
  /// bounds nothing the streams do not: it is large, and given back at once.
  std::uint32_t connection_window = std::uint32_t{1} << 30;
  /// A connection silent this long is sent a PING...
  std::chrono::milliseconds ping_after{30000};
  /// ...and given up (its streams fail) when nothing arrives this long after it.
  std::chrono::milliseconds ping_timeout{15000};
  /// A connection without streams this long is closed.
  std::chrono::milliseconds idle_timeout{60000};
  /// "host:port", for messages.
  std::string server;
};

/// One HTTP/2 connection. Made by Http2Pool once ALPN chose "h2"; strand only.
class Http2Session : public std::enable_shared_from_this<Http2Session> {
 public:
  /// `token` is held while the session's reader, writer or timer may still run.
  Http2Session(ConnectionPtr conn, Http2SessionOptions options, std::shared_ptr<void> token);
  // NOLINTNEXTLINE(bugprone-exception-escape): only bad_alloc can escape: terminate
  ~Http2Session();
  Http2Session(const Http2Session&) = delete;
  Http2Session& operator=(const Http2Session&) = delete;

  /// Sends the preface and our SETTINGS, starts reading, and waits for the server's SETTINGS
  /// (the stream limit among them) until `deadline`.
  awaitable<Status> start(std::chrono::steady_clock::time_point deadline);
  /// Whether a new stream may be opened: the connection is up, not going away, and below the
  /// server's SETTINGS_MAX_CONCURRENT_STREAMS.
  [[nodiscard]] bool can_open() const;
  /// Opens a stream whose request is `fields` (pseudo-header fields first) with no body.
  /// Precondition: can_open(). Returns its id.
  std::uint32_t open(const std::vector<HeaderField>& fields,
                     std::shared_ptr<Http2StreamHandler> handler);
  /// Stops giving the stream's window back: its owner is far behind. The server may still
  /// send what the window allows.
  void hold(std::uint32_t id);
  /// Gives back what was held, and goes on giving back.
  void release(std::uint32_t id);
  /// Resets the stream (RST_STREAM CANCEL); its handler hears nothing more.
  void reset(std::uint32_t id);
  /// A stream found the connection silent (its idle deadline passed, or its response did not
  /// come in time): a PING goes out now unless one is waiting, and no stream is opened here
  /// until something arrives; none within the PING's timeout closes the connection.
  void suspect();
  /// Ends the connection: every stream's handler gets on_end(`why`).
  void close(const Error& why);
  [[nodiscard]] bool closed() const { return closed_; }

 private:
  struct Stream {
    std::shared_ptr<Http2StreamHandler> handler;
    std::int64_t window = 0;    // what the server may still send it
    std::uint32_t pending = 0;  // taken and not given back yet
    bool held = false;
    bool got_head = false;
    bool touched = false;  // in touched_
  };

  awaitable<void> read_loop(std::shared_ptr<Http2Session> self);
  awaitable<void> read_frames();
  awaitable<void> write_loop(std::shared_ptr<Http2Session> self);
  void send(const std::string& frames);
  void flush();
  /// Handles one frame; a connection error is returned, a stream error handled here.
  Http2Status on_frame(const Frame& frame);
  Http2Status on_header_block(const HeaderBlock& block);
  Http2Status on_data(const DataFrame& data);
  void on_settings(const SettingsFrame& settings);
  void on_goaway(const GoawayFrame& goaway);
  /// Removes the stream and tells its handler (strand: the handler may call back).
  void end_stream(std::uint32_t id, std::optional<Error> error, bool unprocessed);
  void give_back(std::uint32_t id, Stream& s);
  void fail(const Http2Error& error);
  void send_ping();
  void arm_timer();
  void on_timer();

  ConnectionPtr conn_;
  const Http2SessionOptions options_;
  std::shared_ptr<void> token_;
  FrameReader reader_;
  HeaderBlockAssembler assembler_;
  HpackDecoder decoder_;
  PeerSettings peer_;
  std::map<std::uint32_t, Stream> streams_;
  std::vector<std::uint32_t> touched_;  // streams that got data in the current read
  std::uint32_t next_id_ = 1;
  std::int64_t connection_window_ = kDefaultInitialWindowSize;
  std::uint32_t connection_pending_ = 0;
  bool settings_received_ = false;
  bool table_update_due_ = false;  // the next request starts with a table size update to 0
  bool going_away_ = false;
  bool closed_ = false;
  std::optional<Error> failure_;  // why it closed
  // The writer: frames queued while a write is in progress go in the next one.
  std::string outbox_;
  std::string writing_;
  bool write_running_ = false;
  std::chrono::steady_clock::time_point write_started_;  // of the write in progress
  // Liveness and idleness.
  asio::steady_timer timer_;
  std::chrono::steady_clock::time_point last_read_;
  std::chrono::steady_clock::time_point idle_since_;
  bool ping_outstanding_ = false;
  bool suspected_ = false;  // suspect() was called and nothing arrived since
  std::chrono::steady_clock::time_point ping_sent_;
  // start()'s wait for the server's SETTINGS.
  std::optional<asio::steady_timer> ready_timer_;
};

/// The HTTP/2 sessions of one transport, one set per (client certificate, TLS context), and the
/// way a watch gets one: an existing session that can take a stream, else a new connection that
/// offers "h2" by ALPN. A server that chooses HTTP/1.1 gives the watch that connection for
/// itself, and is not asked again (for this certificate and context). Watches that come while a
/// session is being connected wait for it rather than connect their own. Strand only.
class Http2Pool {
 public:
  Http2Pool(Connector& connector, Http2SessionOptions options,
            std::function<std::shared_ptr<void>()> make_token)
      : connector_(connector), options_(std::move(options)), make_token_(std::move(make_token)) {}

  struct Lease {
    std::shared_ptr<Http2Session> session;  ///< set: open a stream on it
    ConnectionPtr http1;  ///< else a new connection on which the server chose HTTP/1.1
  };
  awaitable<Result<Lease>> acquire(std::shared_ptr<ssl::context> context, std::size_t cert_id,
                                   std::chrono::steady_clock::time_point deadline);
  /// Closes every session (their streams fail with `why`).
  void close_all(const Error& why);
  /// Sessions open now (for tests).
  [[nodiscard]] std::size_t sessions() const;

 private:
  struct Entry {
    std::shared_ptr<ssl::context> context;
    std::size_t cert_id = 0;
    std::vector<std::shared_ptr<Http2Session>> sessions;
    /// Set while a connection is being made; cancelled when it is done.
    std::shared_ptr<asio::steady_timer> connecting;
    bool http1_only = false;
  };
  Entry& entry(const std::shared_ptr<ssl::context>& context, std::size_t cert_id);

  Connector& connector_;
  const Http2SessionOptions options_;
  std::function<std::shared_ptr<void>()> make_token_;
  std::vector<Entry> entries_;
};

/// A request as an HTTP/2 header list: the pseudo-header fields (:method, :scheme, :authority
/// from Host, :path), then the other fields with lower-case names, without those HTTP/2 forbids
/// (Connection and the fields it names, Keep-Alive, Proxy-Connection, Transfer-Encoding,
/// Upgrade, Host).
std::vector<HeaderField> http2_request_fields(const http::request<http::string_body>& req);

}  // namespace kinformer::client::detail
