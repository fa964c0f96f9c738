#include "h2_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "fake_apiserver.h"
#include "http2/hpack.h"

namespace kinformer::testing {

namespace h2 = client::detail;
using h2::ErrorCode;
using h2::FrameType;
using h2::SettingId;
using Clock = std::chrono::steady_clock;

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The OpenSSL errors queued on this thread, joined (and cleared): for exception messages.
std::string openssl_errors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "no OpenSSL error queued" : out;
}

void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("H2TestServer: ") + what + ": " + openssl_errors());
}

void check_errno(bool ok, const char* what) {
  if (!ok) {
    throw std::runtime_error(std::string("H2TestServer: ") + what + ": " +
                             std::generic_category().message(errno));
  }
}

// An eventfd that other threads write to wake a thread blocked in poll().
class WakeFd {
 public:
  WakeFd() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) { check_errno(fd_ >= 0, "eventfd"); }
  ~WakeFd() { ::close(fd_); }
  WakeFd(const WakeFd&) = delete;
  WakeFd& operator=(const WakeFd&) = delete;

  void wake() const {
    const std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(fd_, &one, sizeof one);
  }
  void drain() const {
    std::uint64_t count = 0;
    [[maybe_unused]] auto n = ::read(fd_, &count, sizeof count);
  }
  [[nodiscard]] int fd() const { return fd_; }

 private:
  int fd_;
};

// ALPN (RFC 7301): "h2" when the client offers it, else no protocol.
int select_h2(SSL*, const unsigned char** out, unsigned char* out_len, const unsigned char* in,
              unsigned int in_len, void*) {
  static const unsigned char kH2[] = {2, 'h', '2'};
  unsigned char* selected = nullptr;
  unsigned char selected_len = 0;
  if (SSL_select_next_proto(&selected, &selected_len, kH2, sizeof kH2, in, in_len) !=
      OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_NOACK;
  }
  *out = selected;
  *out_len = selected_len;
  return SSL_TLSEXT_ERR_OK;
}

// Every certificate in `pem`, in order.
std::vector<X509*> read_certs(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  check(bio != nullptr, "BIO_new_mem_buf");
  std::vector<X509*> certs;
  while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) certs.push_back(cert);
  ERR_clear_error();  // the end of the PEM data
  BIO_free(bio);
  return certs;
}

SSL_CTX* make_ssl_ctx(const Pki& pki, bool require_client_cert) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  check(ctx != nullptr, "SSL_CTX_new");
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  std::vector<X509*> chain = read_certs(pki.server.cert_pem);
  check(!chain.empty(), "the server certificate PEM holds no certificate");
  check(SSL_CTX_use_certificate(ctx, chain.front()) == 1, "SSL_CTX_use_certificate");
  X509_free(chain.front());
  for (std::size_t i = 1; i < chain.size(); ++i) {
    check(SSL_CTX_add_extra_chain_cert(ctx, chain[i]) == 1, "SSL_CTX_add_extra_chain_cert");
  }
  BIO* bio =
      BIO_new_mem_buf(pki.server.key_pem.data(), static_cast<int>(pki.server.key_pem.size()));
  check(bio != nullptr, "BIO_new_mem_buf");
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  check(key != nullptr, "PEM_read_bio_PrivateKey");
  check(SSL_CTX_use_PrivateKey(ctx, key) == 1, "SSL_CTX_use_PrivateKey");
  EVP_PKEY_free(key);
  if (require_client_cert) {
    for (X509* ca : read_certs(pki.ca.cert_pem)) {
      check(X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), ca) == 1, "X509_STORE_add_cert");
      check(SSL_CTX_add_client_CA(ctx, ca) == 1, "SSL_CTX_add_client_CA");
      X509_free(ca);
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  SSL_CTX_set_alpn_select_cb(ctx, select_h2, nullptr);
  return ctx;
}

void put_u16(std::string& out, std::uint32_t v) {
  out.push_back(static_cast<char>((v >> 8) & 0xff));
  out.push_back(static_cast<char>(v & 0xff));
}

void put_u32(std::string& out, std::uint32_t v) {
  put_u16(out, v >> 16);
  put_u16(out, v & 0xffff);
}

std::uint32_t get_u32(std::string_view in, std::size_t at) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<std::uint8_t>(in[at + i]);
  return v;
}

// A client's SETTINGS frame (§6.5), decoded as a server must: decode_frame is the client's and
// refuses SETTINGS_ENABLE_PUSH 1, which a client may send. Unknown ids are kept (recorded).
h2::Http2Result<h2::DecodedFrame> decode_client_settings(const h2::Frame& frame) {
  const h2::FrameHeader& h = frame.header;
  const std::string what = "SETTINGS frame on stream " + std::to_string(h.stream_id);
  if (h.stream_id != 0) {
    return h2::Http2Error::connection(ErrorCode::protocol_error, what + ": not on stream 0");
  }
  h2::SettingsFrame settings;
  settings.ack = h.has(h2::kFlagAck);
  if (settings.ack && h.length != 0) {
    return h2::Http2Error::connection(
        ErrorCode::frame_size_error,
        what + ": an ACK with a payload of " + std::to_string(h.length) + " bytes");
  }
  if (h.length % 6 != 0) {
    return h2::Http2Error::connection(
        ErrorCode::frame_size_error,
        what + ": length " + std::to_string(h.length) + " is not a multiple of 6");
  }
  for (std::size_t at = 0; at < frame.payload.size(); at += 6) {
    const auto id = static_cast<SettingId>((static_cast<std::uint8_t>(frame.payload[at]) << 8) |
                                           static_cast<std::uint8_t>(frame.payload[at + 1]));
    const std::uint32_t value = get_u32(frame.payload, at + 2);
    const std::string bad = what + ": " + h2::setting_name(id) + " " + std::to_string(value);
    if (id == SettingId::enable_push && value > 1) {
      return h2::Http2Error::connection(ErrorCode::protocol_error, bad + " is not 0 or 1");
    }
    if (id == SettingId::initial_window_size && value > h2::kMaxWindowSize) {
      return h2::Http2Error::connection(ErrorCode::flow_control_error, bad + " is above 2^31 - 1");
    }
    if (id == SettingId::max_frame_size &&
        (value < h2::kDefaultMaxFrameSize || value > h2::kMaxFrameSizeLimit)) {
      return h2::Http2Error::connection(ErrorCode::protocol_error,
                                        bad + " is outside 16384 to 2^24 - 1");
    }
    settings.settings.push_back({id, value});
  }
  return h2::DecodedFrame(std::move(settings));
}

// Why a request's header list is malformed (§8.2, §8.3.1), or "" when it is not; fills `request`.
std::string parse_request_fields(const std::vector<h2::HeaderField>& fields, H2Request& request) {
  bool regular_seen = false;
  std::set<std::string> pseudo_seen;
  for (const auto& [name, value] : fields) {
    if (name.empty()) return "a field with an empty name";
    if (name != lower(name)) return "field name '" + name + "' is not lower case";
    if (name.front() == ':') {
      if (regular_seen) return "pseudo-header " + name + " after a regular field";
      if (!pseudo_seen.insert(name).second) return "pseudo-header " + name + " twice";
      if (name == ":method") {
        request.method = value;
      } else if (name == ":path") {
        request.path = value;
      } else if (name == ":authority") {
        request.authority = value;
      } else if (name == ":scheme") {
        request.scheme = value;
      } else {
        return "pseudo-header " + name + " is not a request pseudo-header";
      }
      continue;
    }
    regular_seen = true;
    if (name == "connection" || name == "proxy-connection" || name == "keep-alive" ||
        name == "transfer-encoding" || name == "upgrade") {
      return "connection-specific field '" + name + "'";
    }
    if (name == "te" && value != "trailers") return "te: '" + value + "' (only 'trailers' may be)";
    request.headers.emplace_back(name, value);
  }
  if (!pseudo_seen.contains(":method")) return "no :method";
  if (request.method != "CONNECT") {
    if (!pseudo_seen.contains(":scheme")) return "no :scheme";
    if (request.path.empty()) return "no :path, or an empty one";
  }
  return {};
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// H2Request / H2Reply / H2Stream

std::string H2Request::header(std::string_view name) const {
  const std::string key = lower(name);
  for (const auto& [k, v] : headers) {
    if (k == key) return v;
  }
  return {};
}

H2Reply H2Reply::json(std::string body, int status) {
  H2Reply r;
  r.status = status;
  r.headers.emplace_back("content-type", "application/json");
  r.body = std::move(body);
  return r;
}

H2Reply H2Reply::api_status(int code, std::string reason, std::string message) {
  return json(Reply::api_status(code, std::move(reason), std::move(message)).body, code);
}

H2Reply H2Reply::streaming(std::shared_ptr<H2Stream> stream, int status) {
  H2Reply r;
  r.status = status;
  r.headers.emplace_back("content-type", "application/json");
  r.stream = std::move(stream);
  return r;
}

H2Reply H2Reply::reset_stream(ErrorCode code) {
  H2Reply r;
  r.reset = code;
  return r;
}

void H2Stream::send(std::string bytes) {
  std::lock_guard lock(mu_);
  if (bytes.empty() || closed_ || end_requested_ || reset_request_) return;
  if (queue_.empty()) {
    queue_ = std::move(bytes);
  } else {
    queue_ += bytes;
  }
  if (wake_) wake_();
}

void H2Stream::end() {
  std::lock_guard lock(mu_);
  if (closed_ || reset_request_) return;
  end_requested_ = true;
  if (wake_) wake_();
}

void H2Stream::reset(ErrorCode code) {
  std::lock_guard lock(mu_);
  if (closed_ || reset_request_) return;
  reset_request_ = code;
  if (wake_) wake_();
}

std::uint32_t H2Stream::id() const {
  std::lock_guard lock(mu_);
  return id_;
}

bool H2Stream::wait_started(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return started_ || closed_; });
  return started_;
}

std::size_t H2Stream::bytes_sent() const {
  std::lock_guard lock(mu_);
  return bytes_sent_;
}

std::size_t H2Stream::bytes_queued() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

bool H2Stream::wait_sent(std::size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return bytes_sent_ >= n || closed_; });
  return bytes_sent_ >= n;
}

bool H2Stream::wait_blocked(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return blocked_; });
}

std::uint64_t H2Stream::window_updates() const {
  std::lock_guard lock(mu_);
  return window_updates_;
}

bool H2Stream::wait_window_updates(std::uint64_t at_least,
                                   std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return window_updates_ >= at_least || closed_; });
  return window_updates_ >= at_least;
}

std::optional<ErrorCode> H2Stream::client_reset() const {
  std::lock_guard lock(mu_);
  return client_reset_;
}

bool H2Stream::wait_client_reset(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return client_reset_.has_value() || closed_; });
  return client_reset_.has_value();
}

bool H2Stream::closed() const {
  std::lock_guard lock(mu_);
  return closed_;
}

bool H2Stream::wait_closed(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return closed_; });
}

// ---------------------------------------------------------------------------------------------
// Server

struct H2TestServer::Impl {
  struct Route {
    std::string method;
    std::string path;
    H2Handler handler;
  };

  // What a test asks of a connection, done on its thread.
  struct Command {
    enum Kind { goaway, close, ping } kind;
    std::uint32_t last_stream_id = 0;
    ErrorCode code = ErrorCode::no_error;
    std::string debug_data;
  };

  // One accepted connection: what other threads see of it and ask of it (guarded by Impl::mu),
  // and its thread. The socket and TLS state are the thread's own (Session).
  struct Connection {
    Connection(std::uint64_t n, int socket) : number(n), fd(socket) {}
    std::uint64_t number;
    int fd;  // the Session's; closed by it
    WakeFd wake;
    std::thread thread;

    std::vector<Command> commands;                                 // guarded by mu
    std::map<std::uint8_t, std::size_t> frames;                    // guarded by mu: by frame type
    std::map<std::uint16_t, std::uint32_t> settings;               // guarded by mu: the client's
    std::size_t settings_acks = 0;                                 // guarded by mu
    std::uint64_t connection_window_updates = 0;                   // guarded by mu
    std::map<std::uint32_t, std::uint64_t> stream_window_updates;  // guarded by mu
    std::map<std::uint32_t, ErrorCode> client_resets;              // guarded by mu
    std::size_t client_pings = 0;                                  // guarded by mu
    std::size_t ping_acks = 0;                                     // guarded by mu
    std::size_t open_streams = 0;                                  // guarded by mu
    bool open = false;                                             // guarded by mu: h2 and not over
    bool client_closed = false;                                    // guarded by mu
  };

  class Session;

  explicit Impl(H2TestServerOptions o) : options(std::move(o)) {}

  // Records a change of observable state and wakes every waiter. Call with mu held.
  void changed() {
    ++generation;
    cv.notify_all();
  }

  void error(std::string message) {
    std::lock_guard lock(mu);
    errors.push_back(std::move(message));
    changed();
  }

  H2Handler route(const H2Request& request) {
    std::string_view path = request.path;
    path = path.substr(0, path.find('?'));
    std::lock_guard lock(mu);
    for (auto it = routes.rbegin(); it != routes.rend(); ++it) {
      if (it->method != request.method) continue;
      const bool match =
          !it->path.empty() && it->path.back() == '*'
              ? path.starts_with(std::string_view(it->path).substr(0, it->path.size() - 1))
              : path == it->path;
      if (match) return it->handler;
    }
    return nullptr;
  }

  // The connection numbered `n`, or null. Call with mu held.
  Connection* find(std::uint64_t n) const {
    return n >= 1 && n <= conns.size() ? conns[n - 1].get() : nullptr;
  }

  void command(std::uint64_t n, Command c, const char* what) {
    std::lock_guard lock(mu);
    Connection* conn = find(n);
    if (conn == nullptr) {
      throw std::invalid_argument(std::string("H2TestServer::") + what + ": no connection " +
                                  std::to_string(n) + " (" + std::to_string(conns.size()) +
                                  " accepted so far)");
    }
    conn->commands.push_back(std::move(c));
    conn->wake.wake();
  }

  void accept_loop();

  const H2TestServerOptions options;
  SSL_CTX* ssl_ctx = nullptr;
  int listen_fd = -1;
  std::uint16_t port = 0;
  WakeFd wake;  // wakes the acceptor to stop
  std::thread acceptor;

  mutable std::mutex mu;
  mutable std::condition_variable cv;
  std::uint64_t generation = 0;                    // guarded by mu: bumped by changed()
  bool stopping = false;                           // guarded by mu
  bool answer_pings = true;                        // guarded by mu
  std::vector<Route> routes;                       // guarded by mu
  std::vector<std::shared_ptr<Connection>> conns;  // guarded by mu: number - 1 -> connection
  std::uint64_t h2_connections = 0;                // guarded by mu
  std::vector<H2Request> received;                 // guarded by mu
  std::vector<std::string> errors;                 // guarded by mu
  std::size_t refused = 0;                         // guarded by mu
};

// One connection's life, on its own thread: the TLS handshake, then a loop that polls the socket
// and the wake fd, reads and handles frames, runs the test's commands, moves stream bytes into
// the outbox within the windows, and writes the outbox. Not thread-safe: the thread's own.
class H2TestServer::Impl::Session {
 public:
  Session(Impl& impl, std::shared_ptr<Connection> conn) : impl_(impl), conn_(std::move(conn)) {}

  void run() {
    // A write to a socket the client closed raises SIGPIPE, here directed at this thread: blocked,
    // it leaves the write failing with EPIPE instead of ending the test program.
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, nullptr);

    ssl_ = SSL_new(impl_.ssl_ctx);
    if (ssl_ != nullptr && SSL_set_fd(ssl_, conn_->fd) == 1 && handshake()) {
      {
        std::lock_guard lock(impl_.mu);
        conn_->open = true;
        ++impl_.h2_connections;
        impl_.changed();
      }
      send_settings();
      serve();
    }
    finish();
  }

 private:
  // The send and receive state of one stream the client opened.
  struct StreamState {
    std::int64_t send_window = 0;
    std::int64_t recv_window = h2::kDefaultInitialWindowSize;
    bool remote_open = true;         // the client may send more (no END_STREAM yet)
    bool answered = false;           // the response's HEADERS are framed
    H2Request request;               // until answered
    std::shared_ptr<H2Stream> body;  // the response body, once answered with one
  };

  enum class Phase {
    serving,   // reading and answering frames
    draining,  // closing: flush, then close_notify, then read until the client closes
    done,
  };

  std::string who() const { return "connection " + std::to_string(conn_->number); }

  bool stopping() const {
    std::lock_guard lock(impl_.mu);
    return impl_.stopping;
  }

  // --- TLS ---

  bool handshake() {
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    for (;;) {
      ERR_clear_error();
      const int r = SSL_accept(ssl_);
      if (r == 1) break;
      short events = 0;
      switch (SSL_get_error(ssl_, r)) {
        case SSL_ERROR_WANT_READ:
          events = POLLIN;
          break;
        case SSL_ERROR_WANT_WRITE:
          events = POLLOUT;
          break;
        default:
          return false;  // a client that refused the certificate, or went away
      }
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return false;
      if (!wait_socket(events, static_cast<int>(left.count()))) return false;
    }
    const unsigned char* alpn = nullptr;
    unsigned int alpn_len = 0;
    SSL_get0_alpn_selected(ssl_, &alpn, &alpn_len);
    if (std::string_view(reinterpret_cast<const char*>(alpn), alpn_len) != "h2") {
      impl_.error(who() + ": the client did not offer ALPN \"h2\" in its TLS handshake");
      return false;
    }
    return true;
  }

  // Waits (handshake only) until the socket is ready for `events`; false on timeout, or when
  // the server stops or the test closes the connection.
  bool wait_socket(short events, int timeout_ms) {
    pollfd fds[2] = {{conn_->fd, events, 0}, {conn_->wake.fd(), POLLIN, 0}};
    if (::poll(fds, 2, timeout_ms) <= 0) return false;
    if (fds[1].revents != 0) {
      conn_->wake.drain();
      std::lock_guard lock(impl_.mu);
      if (impl_.stopping) return false;
      for (const Command& c : conn_->commands) {
        if (c.kind == Command::close) return false;
      }
    }
    return true;
  }

  // --- the loop ---

  void serve() {
    std::array<char, 16384> buf;
    std::optional<Clock::time_point> drain_deadline;
    while (phase_ != Phase::done) {
      run_commands();
      if (phase_ == Phase::done) break;
      if (phase_ == Phase::serving) pump();
      if (phase_ == Phase::serving && goaway_last_ && streams_.empty()) begin_close();
      flush();
      if (phase_ == Phase::draining && outbox_.empty() && !drain_deadline) {
        // Our side is done: close_notify, then the FIN. The client's bytes are still read (and
        // dropped) until it closes: closing with them unread would reset the connection, and
        // the client might lose the last frames.
        ERR_clear_error();
        SSL_shutdown(ssl_);
        ::shutdown(conn_->fd, SHUT_WR);
        drain_deadline = Clock::now() + std::chrono::seconds(5);
      }
      if (phase_ == Phase::done) break;

      short events = POLLIN;
      if (!outbox_.empty() || read_wants_write_) events |= POLLOUT;
      pollfd fds[2] = {{conn_->fd, events, 0}, {conn_->wake.fd(), POLLIN, 0}};
      int timeout_ms = -1;
      if (drain_deadline) {
        timeout_ms = static_cast<int>(std::max<std::int64_t>(
            0, std::chrono::duration_cast<std::chrono::milliseconds>(*drain_deadline - Clock::now())
                   .count()));
      }
      const int n = ::poll(fds, 2, timeout_ms);
      if (n < 0 && errno != EINTR) break;
      if (fds[1].revents != 0) conn_->wake.drain();
      if (stopping()) break;
      if (fds[0].revents != 0) read_all(buf);
      if (drain_deadline && Clock::now() >= *drain_deadline) break;
    }
  }

  // Reads until the TLS layer has no more: a non-blocking SSL_read may hold decrypted bytes
  // back from a record already read, so reading stops only at WANT_READ.
  void read_all(std::array<char, 16384>& buf) {
    read_wants_write_ = false;
    while (phase_ != Phase::done) {
      ERR_clear_error();
      const int n = SSL_read(ssl_, buf.data(), static_cast<int>(buf.size()));
      if (n > 0) {
        if (phase_ == Phase::serving) on_bytes(std::string_view(buf.data(), n));
        continue;
      }
      const int err = SSL_get_error(ssl_, n);
      if (err == SSL_ERROR_WANT_READ) return;
      if (err == SSL_ERROR_WANT_WRITE) {
        read_wants_write_ = true;
        return;
      }
      // close_notify, an EOF without one, or a reset: the client closed the connection.
      std::lock_guard lock(impl_.mu);
      conn_->client_closed = true;
      impl_.changed();
      phase_ = Phase::done;
    }
  }

  void flush() {
    while (!outbox_.empty() && phase_ != Phase::done) {
      // After WANT_WRITE, SSL_write must be called again with the same bytes.
      const std::size_t len =
          retry_len_ != 0 ? retry_len_ : std::min(outbox_.size(), std::size_t{64} * 1024);
      ERR_clear_error();
      const int n = SSL_write(ssl_, outbox_.data(), static_cast<int>(len));
      if (n > 0) {
        outbox_.erase(0, static_cast<std::size_t>(n));
        retry_len_ = 0;
        continue;
      }
      const int err = SSL_get_error(ssl_, n);
      if (err == SSL_ERROR_WANT_WRITE || err == SSL_ERROR_WANT_READ) {
        retry_len_ = len;
        return;
      }
      std::lock_guard lock(impl_.mu);  // EPIPE or a reset: the client is gone
      conn_->client_closed = true;
      impl_.changed();
      phase_ = Phase::done;
    }
  }

  void run_commands() {
    std::vector<Command> commands;
    {
      std::lock_guard lock(impl_.mu);
      commands.swap(conn_->commands);
    }
    for (Command& c : commands) {
      if (phase_ == Phase::done) return;
      switch (c.kind) {
        case Command::close:
          phase_ = Phase::done;
          return;
        case Command::ping: {
          h2::PingData opaque{};
          const std::uint64_t n = ++pings_sent_;
          for (std::size_t i = 0; i < opaque.size(); ++i) {
            opaque[i] = static_cast<std::uint8_t>(n >> (8 * (7 - i)));
          }
          h2::append_ping(outbox_, opaque, false);
          break;
        }
        case Command::goaway:
          if (phase_ != Phase::serving) break;
          h2::append_goaway(outbox_, c.last_stream_id, c.code, c.debug_data);
          goaway_last_ = std::min(goaway_last_.value_or(h2::kMaxStreamId), c.last_stream_id);
          break;
      }
    }
  }

  // The end of the connection, however it came: the socket closed (at once, or at the end of a
  // graceful close), every attached stream over.
  void finish() {
    if (ssl_ != nullptr) SSL_free(ssl_);
    ::close(conn_->fd);
    for (auto& [id, s] : streams_) detach(s);
    streams_.clear();
    std::lock_guard lock(impl_.mu);
    conn_->open = false;
    conn_->open_streams = 0;
    impl_.changed();
  }

  void begin_close() {
    if (phase_ == Phase::serving) phase_ = Phase::draining;
  }

  // --- errors ---

  void connection_error(ErrorCode code, const std::string& message) {
    impl_.error(who() + ": connection error " + h2::error_code_name(code) + ": " + message);
    h2::append_goaway(outbox_, highest_stream_, code, message);
    begin_close();
  }

  void stream_error(std::uint32_t stream_id, ErrorCode code, const std::string& message) {
    impl_.error(who() + ": stream " + std::to_string(stream_id) + ": stream error " +
                h2::error_code_name(code) + ": " + message);
    h2::append_rst_stream(outbox_, stream_id, code);
    close_stream(stream_id);
  }

  void fail(const h2::Http2Error& e) {
    if (e.scope == h2::ErrorScope::stream) {
      stream_error(e.stream_id, e.code, e.message);
    } else {
      connection_error(e.code, e.message);
    }
  }

  // --- streams ---

  void publish_open_streams() {
    std::lock_guard lock(impl_.mu);
    conn_->open_streams = streams_.size();
    impl_.changed();
  }

  // Ends the stream's body: no more calls reach the connection.
  static void detach(StreamState& s) {
    if (!s.body) return;
    std::lock_guard lock(s.body->mu_);
    s.body->wake_ = nullptr;
    s.body->closed_ = true;
    s.body->blocked_ = false;
    s.body->cv_.notify_all();
  }

  void close_stream(std::uint32_t id) {
    auto it = streams_.find(id);
    if (it == streams_.end()) return;
    detach(it->second);
    streams_.erase(it);
    publish_open_streams();
  }

  void refuse(std::uint32_t id) {
    h2::append_rst_stream(outbox_, id, ErrorCode::refused_stream);
    std::lock_guard lock(impl_.mu);
    ++impl_.refused;
    impl_.changed();
  }

  // Moves bytes from the streams' bodies into the outbox, as far as the windows allow; sends
  // END_STREAM or RST_STREAM as the test asked.
  void pump() {
    std::vector<std::uint32_t> ended;  // END_STREAM sent
    std::vector<std::uint32_t> reset;  // RST_STREAM sent
    for (auto& [id, s] : streams_) {
      if (!s.body) continue;
      H2Stream& body = *s.body;
      std::lock_guard lock(body.mu_);
      if (body.reset_request_) {
        h2::append_rst_stream(outbox_, id, *body.reset_request_);
        reset.push_back(id);
        continue;
      }
      std::size_t taken = 0;
      bool end_sent = false;
      while (taken < body.queue_.size() && s.send_window > 0 && connection_window_ > 0) {
        const std::size_t n = std::min<std::size_t>(
            {body.queue_.size() - taken, static_cast<std::size_t>(s.send_window),
             static_cast<std::size_t>(connection_window_), client_max_frame_size_});
        taken += n;
        end_sent = body.end_requested_ && taken == body.queue_.size();  // with the last bytes
        h2::append_data(outbox_, id, std::string_view(body.queue_).substr(taken - n, n), end_sent,
                        client_max_frame_size_);
        s.send_window -= static_cast<std::int64_t>(n);
        connection_window_ -= static_cast<std::int64_t>(n);
        body.bytes_sent_ += n;
      }
      body.queue_.erase(0, taken);
      if (!end_sent && body.queue_.empty() && body.end_requested_) {
        h2::append_data(outbox_, id, {}, true, client_max_frame_size_);
        end_sent = true;
      }
      if (end_sent) ended.push_back(id);
      body.blocked_ = !body.queue_.empty();
      body.cv_.notify_all();
    }
    for (std::uint32_t id : reset) close_stream(id);
    for (std::uint32_t id : ended) {
      StreamState& s = streams_.at(id);
      detach(s);
      s.body.reset();
      // Half-closed (local) until the client ends its side too (it has, for a GET).
      if (!s.remote_open) close_stream(id);
    }
  }

  // --- reading ---

  void on_bytes(std::string_view bytes) {
    if (preface_.size() < h2::kClientPreface.size()) {
      const std::size_t n = std::min(bytes.size(), h2::kClientPreface.size() - preface_.size());
      preface_.append(bytes.substr(0, n));
      bytes.remove_prefix(n);
      if (preface_ != h2::kClientPreface.substr(0, preface_.size())) {
        std::string shown;
        for (char c : preface_) {
          char hex[8];
          std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned char>(c));
          shown += std::isprint(static_cast<unsigned char>(c)) ? std::string(1, c) : hex;
        }
        connection_error(ErrorCode::protocol_error,
                         "the client's first bytes are not the HTTP/2 preface: \"" + shown + "\"");
        return;
      }
    }
    while (phase_ == Phase::serving) {
      auto frame = reader_.read(bytes);
      if (!frame) return fail(frame.error());
      if (!*frame) return;
      on_frame(**frame);
    }
  }

  void on_frame(const h2::Frame& frame) {
    const h2::FrameHeader& h = frame.header;
    {
      std::lock_guard lock(impl_.mu);
      ++conn_->frames[static_cast<std::uint8_t>(h.type)];
      impl_.changed();
    }
    if (!got_settings_ && (h.type != FrameType::settings || h.has(h2::kFlagAck))) {
      return connection_error(ErrorCode::protocol_error, "the first frame after the preface is a " +
                                                             h2::frame_type_name(h.type) +
                                                             " frame, not SETTINGS (§3.4)");
    }
    if (auto s = assembler_.check_sequence(h); !s) return fail(s.error());
    auto decoded =
        h.type == FrameType::settings ? decode_client_settings(frame) : h2::decode_frame(frame);
    if (!decoded) return fail(decoded.error());
    auto block = assembler_.on_frame(*decoded);
    if (!block) return fail(block.error());
    if (*block) return on_header_block(**block);
    std::visit([this](const auto& f) { on(f); }, *decoded);
  }

  void on(const h2::HeadersFrame&) {}       // a block's start: the assembler has it
  void on(const h2::ContinuationFrame&) {}  // likewise
  void on(const h2::IgnoredFrame&) {}
  void on(const h2::GoawayFrame&) {}  // counted; the client closes the connection next

  void on(const h2::SettingsFrame& f) {
    if (f.ack) {
      std::lock_guard lock(impl_.mu);
      ++conn_->settings_acks;
      impl_.changed();
      // The client encodes for our table size from now on.
      if (impl_.options.header_table_size) {
        decoder_.set_table_size_limit(*impl_.options.header_table_size);
      }
      return;
    }
    got_settings_ = true;
    for (const h2::Setting& s : f.settings) {
      if (s.id == SettingId::initial_window_size) {
        // §6.9.2: the change applies to every stream's window at once.
        const std::int64_t delta = std::int64_t{s.value} - std::int64_t{client_initial_window_};
        client_initial_window_ = s.value;
        for (auto& [id, st] : streams_) {
          st.send_window += delta;
          if (st.send_window > h2::kMaxWindowSize) {
            return connection_error(ErrorCode::flow_control_error,
                                    "SETTINGS_INITIAL_WINDOW_SIZE " + std::to_string(s.value) +
                                        " takes stream " + std::to_string(id) +
                                        "'s window above 2^31 - 1");
          }
        }
      } else if (s.id == SettingId::max_frame_size) {
        client_max_frame_size_ = s.value;
      }
    }
    {
      std::lock_guard lock(impl_.mu);
      for (const h2::Setting& s : f.settings) {
        conn_->settings[static_cast<std::uint16_t>(s.id)] = s.value;
      }
      impl_.changed();
    }
    h2::append_settings_ack(outbox_);
  }

  void on(const h2::PingFrame& f) {
    bool answer = false;
    {
      std::lock_guard lock(impl_.mu);
      if (f.ack) {
        ++conn_->ping_acks;
      } else {
        ++conn_->client_pings;
        answer = impl_.answer_pings;
      }
      impl_.changed();
    }
    if (answer) h2::append_ping(outbox_, f.opaque, true);
  }

  void on(const h2::WindowUpdateFrame& f) {
    if (f.stream_id == 0) {
      connection_window_ += f.increment;
      if (connection_window_ > h2::kMaxWindowSize) {
        return connection_error(ErrorCode::flow_control_error,
                                "WINDOW_UPDATE frame on stream 0: increment " +
                                    std::to_string(f.increment) +
                                    " takes the connection's window above 2^31 - 1");
      }
      pump();  // before the increment is visible: a test that saw it sees its effect too
      std::lock_guard lock(impl_.mu);
      conn_->connection_window_updates += f.increment;
      impl_.changed();
      return;
    }
    if (f.stream_id > highest_stream_) {
      return connection_error(ErrorCode::protocol_error, "WINDOW_UPDATE frame on stream " +
                                                             std::to_string(f.stream_id) +
                                                             ", which is idle (§5.1)");
    }
    auto it = streams_.find(f.stream_id);
    std::shared_ptr<H2Stream> body;
    if (it != streams_.end()) {
      it->second.send_window += f.increment;
      if (it->second.send_window > h2::kMaxWindowSize) {
        return stream_error(f.stream_id, ErrorCode::flow_control_error,
                            "WINDOW_UPDATE frame: increment " + std::to_string(f.increment) +
                                " takes the stream's window above 2^31 - 1");
      }
      body = it->second.body;
      pump();
    }
    if (body) {
      std::lock_guard lock(body->mu_);
      body->window_updates_ += f.increment;
      body->cv_.notify_all();
    }
    std::lock_guard lock(impl_.mu);
    conn_->stream_window_updates[f.stream_id] += f.increment;
    impl_.changed();
  }

  void on(const h2::RstStreamFrame& f) {
    if (f.stream_id > highest_stream_) {
      return connection_error(
          ErrorCode::protocol_error,
          "RST_STREAM frame on stream " + std::to_string(f.stream_id) + ", which is idle (§5.1)");
    }
    client_ended_.insert(f.stream_id);
    auto it = streams_.find(f.stream_id);
    if (it != streams_.end() && it->second.body) {
      std::lock_guard lock(it->second.body->mu_);
      it->second.body->client_reset_ = f.error_code;
    }
    close_stream(f.stream_id);
    std::lock_guard lock(impl_.mu);
    conn_->client_resets[f.stream_id] = f.error_code;
    impl_.changed();
  }

  void on(const h2::DataFrame& f) {
    // Flow control first, whatever the stream: the bytes count against the connection.
    connection_recv_window_ -= f.flow_controlled_size;
    if (connection_recv_window_ < 0) {
      return connection_error(ErrorCode::flow_control_error,
                              "DATA frame on stream " + std::to_string(f.stream_id) +
                                  ": more than the connection's receive window");
    }
    if (f.flow_controlled_size > 0) {
      h2::append_window_update(outbox_, 0, f.flow_controlled_size);
      connection_recv_window_ += f.flow_controlled_size;
    }
    const std::string what = "DATA frame on stream " + std::to_string(f.stream_id);
    if (f.stream_id > highest_stream_) {
      return connection_error(ErrorCode::protocol_error, what + ", which is idle (§5.1)");
    }
    auto it = streams_.find(f.stream_id);
    if (it == streams_.end() || !it->second.remote_open) {
      // A stream we reset may still get frames the client sent before it knew (§5.1): ignored.
      if (it != streams_.end() || client_ended_.contains(f.stream_id)) {
        stream_error(f.stream_id, ErrorCode::stream_closed,
                     what + ": the client already ended the stream");
      }
      return;
    }
    StreamState& s = it->second;
    s.recv_window -= f.flow_controlled_size;
    if (s.recv_window < 0) {
      return stream_error(f.stream_id, ErrorCode::flow_control_error,
                          what + ": more than the stream's receive window");
    }
    s.request.body.append(f.data);
    if (f.end_stream) {
      end_remote(f.stream_id);
    } else if (f.flow_controlled_size > 0) {
      h2::append_window_update(outbox_, f.stream_id, f.flow_controlled_size);
      s.recv_window += f.flow_controlled_size;
    }
  }

  void on_header_block(const h2::HeaderBlock& block) {
    const std::uint32_t id = block.stream_id;
    // Decoded first, whatever becomes of the stream: the HPACK tables must stay in step.
    auto fields = decoder_.decode(block.block);
    if (!fields) {
      return connection_error(
          ErrorCode::compression_error,
          "HEADERS frame on stream " + std::to_string(id) + ": " + fields.error().message);
    }
    const std::string what = "HEADERS frame on stream " + std::to_string(id);
    if (id % 2 == 0) {
      return connection_error(ErrorCode::protocol_error,
                              what + ": a client's streams have odd ids (§5.1.1)");
    }
    if (auto it = streams_.find(id); it != streams_.end()) {
      if (!it->second.remote_open) {
        return stream_error(id, ErrorCode::stream_closed,
                            what + ": the client already ended the stream");
      }
      if (!block.end_stream) {
        return stream_error(id, ErrorCode::protocol_error,
                            what + ": trailers without END_STREAM (§8.1)");
      }
      for (const auto& f : *fields) {
        if (!f.name.empty() && f.name.front() == ':') {
          return stream_error(id, ErrorCode::protocol_error,
                              what + ": pseudo-header " + f.name + " in trailers (§8.1)");
        }
      }
      return end_remote(id);
    }
    if (id <= highest_stream_) {
      if (client_ended_.contains(id)) {
        return connection_error(ErrorCode::stream_closed,
                                what + ": the stream is closed (new streams need ids above " +
                                    std::to_string(highest_stream_) + ")");
      }
      return;  // a stream we reset: its frames in flight are ignored (§5.1)
    }
    highest_stream_ = id;
    if (block.end_stream) client_ended_.insert(id);
    if (goaway_last_ && id > *goaway_last_) return refuse(id);
    if (impl_.options.max_concurrent_streams &&
        streams_.size() >= *impl_.options.max_concurrent_streams) {
      return refuse(id);
    }
    StreamState s;
    s.send_window = client_initial_window_;
    s.remote_open = !block.end_stream;
    s.request.connection = conn_->number;
    s.request.stream_id = id;
    if (const std::string bad = parse_request_fields(*fields, s.request); !bad.empty()) {
      streams_.emplace(id, std::move(s));
      return stream_error(id, ErrorCode::protocol_error, what + ": malformed request: " + bad);
    }
    streams_.emplace(id, std::move(s));
    publish_open_streams();
    if (block.end_stream) answer(id);
  }

  // The client ended its side of the stream (END_STREAM): the request is complete.
  void end_remote(std::uint32_t id) {
    client_ended_.insert(id);
    StreamState& s = streams_.at(id);
    s.remote_open = false;
    if (!s.answered) return answer(id);
    if (!s.body) close_stream(id);  // our side was over already
  }

  // Calls the handler and frames its response's HEADERS; the body follows from pump().
  void answer(std::uint32_t id) {
    H2Request request = streams_.at(id).request;
    H2Reply reply;
    if (H2Handler handler = impl_.route(request)) {
      try {
        reply = handler(request);
      } catch (const std::exception& e) {
        impl_.error(who() + ": stream " + std::to_string(id) + ": the handler threw: " + e.what());
        reply = H2Reply::reset_stream(ErrorCode::internal_error);
      }
    } else {
      reply =
          H2Reply::api_status(404, "NotFound", "the server could not find the requested resource");
    }
    if (reply.stream && !reply.reset && !attach(*reply.stream, id)) {
      impl_.error(who() + ": stream " + std::to_string(id) +
                  ": the handler returned an H2Stream that serves another reply");
      reply = H2Reply::reset_stream(ErrorCode::internal_error);
    }
    // The handler ran on this thread: nothing changed the stream meanwhile.
    StreamState& s = streams_.at(id);
    s.answered = true;
    if (reply.reset) {
      h2::append_rst_stream(outbox_, id, *reply.reset);
      close_stream(id);
    } else {
      std::vector<h2::HeaderField> fields{{":status", std::to_string(reply.status)}};
      bool has_length = false;
      for (const auto& [name, value] : reply.headers) {
        has_length = has_length || lower(name) == "content-length";
        fields.push_back({name, value});
      }
      const bool bodiless = reply.status / 100 == 1 || reply.status == 204 || reply.status == 304;
      if (!reply.stream && !has_length && !bodiless) {
        fields.push_back({"content-length", std::to_string(reply.body.size())});
      }
      std::shared_ptr<H2Stream> body = reply.stream;
      if (!body && !reply.body.empty() && !bodiless) {
        body = std::make_shared<H2Stream>();
        body->send(std::move(reply.body));
        body->end();
        attach(*body, id);
      }
      h2::append_headers(outbox_, id, h2::hpack_encode_request(fields), body == nullptr,
                         client_max_frame_size_);
      s.body = std::move(body);
      if (!s.body && !s.remote_open) close_stream(id);
    }
    std::lock_guard lock(impl_.mu);
    impl_.received.push_back(std::move(request));
    impl_.changed();
  }

  // Makes `body` the response body of stream `id`; false if it serves another reply already.
  bool attach(H2Stream& body, std::uint32_t id) {
    std::lock_guard lock(body.mu_);
    if (body.attached_) return false;
    body.attached_ = true;
    body.id_ = id;
    body.started_ = true;
    body.wake_ = [conn = conn_] { conn->wake.wake(); };
    body.cv_.notify_all();
    return true;
  }

  // --- writing ---

  void send_settings() {
    // A larger table may be used as soon as the client reads our SETTINGS; a smaller one only
    // once it acknowledged them (on(SettingsFrame)).
    if (impl_.options.header_table_size &&
        *impl_.options.header_table_size > h2::kDefaultHeaderTableSize) {
      decoder_.set_table_size_limit(*impl_.options.header_table_size);
    }
    std::vector<h2::Setting> settings;
    if (impl_.options.max_concurrent_streams) {
      settings.push_back(
          {SettingId::max_concurrent_streams, *impl_.options.max_concurrent_streams});
    }
    if (impl_.options.header_table_size) {
      settings.push_back({SettingId::header_table_size, *impl_.options.header_table_size});
    }
    h2::FrameHeader{static_cast<std::uint32_t>(settings.size() * 6), FrameType::settings, 0, 0}
        .append_to(outbox_);
    for (const h2::Setting& s : settings) {
      put_u16(outbox_, static_cast<std::uint16_t>(s.id));
      put_u32(outbox_, s.value);
    }
  }

  Impl& impl_;
  std::shared_ptr<Connection> conn_;
  SSL* ssl_ = nullptr;
  Phase phase_ = Phase::serving;
  std::string outbox_;         // framed, not written yet
  std::size_t retry_len_ = 0;  // the length of an SSL_write to repeat (after WANT_WRITE)
  bool read_wants_write_ = false;
  std::string preface_;  // the client preface's bytes read so far
  bool got_settings_ = false;
  h2::FrameReader reader_;
  h2::HeaderBlockAssembler assembler_;
  h2::HpackDecoder decoder_;
  std::uint32_t client_initial_window_ = h2::kDefaultInitialWindowSize;
  std::uint32_t client_max_frame_size_ = h2::kDefaultMaxFrameSize;
  std::int64_t connection_window_ = h2::kDefaultInitialWindowSize;  // ours to send in
  std::int64_t connection_recv_window_ = h2::kDefaultInitialWindowSize;
  std::uint32_t highest_stream_ = 0;  // the highest stream id the client opened
  std::optional<std::uint32_t> goaway_last_;
  std::map<std::uint32_t, StreamState> streams_;  // open ones
  std::set<std::uint32_t> client_ended_;  // streams the client ended (END_STREAM or RST_STREAM)
  std::uint64_t pings_sent_ = 0;
};

void H2TestServer::Impl::accept_loop() {
  for (;;) {
    pollfd fds[2] = {{listen_fd, POLLIN, 0}, {wake.fd(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) return;
    if (fds[1].revents != 0) return;  // stopping
    if (fds[0].revents == 0) continue;
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::lock_guard lock(mu);
    if (stopping) {
      ::close(fd);
      return;
    }
    auto conn = std::make_shared<Connection>(conns.size() + 1, fd);
    conns.push_back(conn);
    conn->thread = std::thread([this, conn] { Session(*this, conn).run(); });
  }
}

H2TestServer::H2TestServer(H2TestServerOptions options)
    : pki_(options.pki ? *options.pki : make_pki()),
      impl_(std::make_unique<Impl>(std::move(options))) {
  impl_->answer_pings = impl_->options.answer_pings;
  impl_->ssl_ctx = make_ssl_ctx(pki_, impl_->options.require_client_cert);
  impl_->listen_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  check_errno(impl_->listen_fd >= 0, "socket");
  const int one = 1;
  ::setsockopt(impl_->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  check_errno(::bind(impl_->listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0,
              "bind 127.0.0.1:0");
  check_errno(::listen(impl_->listen_fd, 64) == 0, "listen");
  socklen_t len = sizeof addr;
  check_errno(::getsockname(impl_->listen_fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0,
              "getsockname");
  impl_->port = ntohs(addr.sin_port);
  impl_->acceptor = std::thread([impl = impl_.get()] { impl->accept_loop(); });
}

H2TestServer::~H2TestServer() {
  {
    std::lock_guard lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->wake.wake();
  impl_->acceptor.join();
  std::vector<std::shared_ptr<Impl::Connection>> conns;
  {
    std::lock_guard lock(impl_->mu);
    conns = impl_->conns;
  }
  for (auto& conn : conns) {
    conn->wake.wake();
    conn->thread.join();
  }
  ::close(impl_->listen_fd);
  SSL_CTX_free(impl_->ssl_ctx);
}

std::string H2TestServer::url() const { return "https://127.0.0.1:" + std::to_string(port()); }

std::uint16_t H2TestServer::port() const { return impl_->port; }

client::ClusterConfig H2TestServer::cluster_config(
    client::CredentialsProviderPtr credentials) const {
  client::ClusterConfig config;
  config.server = url();
  config.ca_pem = pki_.ca.cert_pem;
  config.credentials = std::move(credentials);
  config.context = "h2-test-server";
  return config;
}

void H2TestServer::on(std::string method, std::string path, H2Handler handler) {
  std::lock_guard lock(impl_->mu);
  impl_->routes.push_back({std::move(method), std::move(path), std::move(handler)});
}

std::uint64_t H2TestServer::connections() const {
  std::lock_guard lock(impl_->mu);
  return impl_->h2_connections;
}

bool H2TestServer::wait_connections(std::uint64_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(impl_->mu);
  return impl_->cv.wait_for(lock, timeout, [&] { return impl_->h2_connections >= n; });
}

std::vector<H2Request> H2TestServer::requests() const {
  std::lock_guard lock(impl_->mu);
  return impl_->received;
}

bool H2TestServer::wait_requests(std::size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(impl_->mu);
  return impl_->cv.wait_for(lock, timeout, [&] { return impl_->received.size() >= n; });
}

std::vector<std::string> H2TestServer::errors() const {
  std::lock_guard lock(impl_->mu);
  return impl_->errors;
}

std::size_t H2TestServer::refused_streams() const {
  std::lock_guard lock(impl_->mu);
  return impl_->refused;
}

bool H2TestServer::wait_until(const std::function<bool()>& condition,
                              std::chrono::milliseconds timeout) const {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    std::uint64_t seen = 0;
    {
      std::lock_guard lock(impl_->mu);
      seen = impl_->generation;
    }
    // Checked without the lock (it takes it itself); a change after `seen` wakes the wait below.
    if (condition()) return true;
    std::unique_lock lock(impl_->mu);
    if (!impl_->cv.wait_until(lock, deadline, [&] { return impl_->generation != seen; })) {
      lock.unlock();
      return condition();
    }
  }
}

std::size_t H2TestServer::frames_received(std::uint64_t connection,
                                          client::detail::FrameType type) const {
  std::lock_guard lock(impl_->mu);
  const Impl::Connection* c = impl_->find(connection);
  if (c == nullptr) return 0;
  auto it = c->frames.find(static_cast<std::uint8_t>(type));
  return it == c->frames.end() ? 0 : it->second;
}

std::optional<std::uint32_t> H2TestServer::client_setting(std::uint64_t connection,
                                                          client::detail::SettingId id) const {
  std::lock_guard lock(impl_->mu);
  const Impl::Connection* c = impl_->find(connection);
  if (c == nullptr) return std::nullopt;
  auto it = c->settings.find(static_cast<std::uint16_t>(id));
  if (it == c->settings.end()) return std::nullopt;
  return it->second;
}

std::size_t H2TestServer::settings_acks(std::uint64_t connection) const {
  std::lock_guard lock(impl_->mu);
  const Impl::Connection* c = impl_->find(connection);
  return c == nullptr ? 0 : c->settings_acks;
}

std::uint64_t H2TestServer::connection_window_updates(std::uint64_t connection) const {
  std::lock_guard lock(impl_->mu);
  const Impl::Connection* c = impl_->find(connection);
  return c == nullptr ? 0 : c->connection_window_updates;
}

std::uint64_t H2TestServer::stream_window_updates(std::uint64_t connection,
                                                  std::uint32_t stream_id) const {
  std::lock_guard lock(impl_->mu);
  const Impl::Connection* c = impl_->find(connection);
  if (c == nullptr) return 0;
  auto it = c->stream_window_updates.find(stream_id);
  return it == c->stream_window_updates.end() ? 0 : it->second;
}

std::optional<ErrorCode> H2TestServer::client_reset(std::uint64_t connection,
                                                    std::uint32_t stream_id) const {
  std::lock_guard lock(impl_->mu);
  const Impl::Connection* c = impl_->find(connection);
  if (c == nullptr) return std::nullopt;
  auto it = c->client_resets.find(stream_id);
  if (it == c->client_resets.end()) return std::nullopt;
  return it->second;
}

std::size_t H2TestServer::open_streams(std::uint64_t connection) const {
  std::lock_guard lock(impl_->mu);
  const Impl::Connection* c = impl_->find(connection);
  return c == nullptr ? 0 : c->open_streams;
}

std::size_t H2TestServer::client_pings(std::uint64_t connection) const {
  std::lock_guard lock(impl_->mu);
  const Impl::Connection* c = impl_->find(connection);
  return c == nullptr ? 0 : c->client_pings;
}

bool H2TestServer::wait_client_pings(std::uint64_t connection, std::size_t n,
                                     std::chrono::milliseconds timeout) const {
  std::unique_lock lock(impl_->mu);
  return impl_->cv.wait_for(lock, timeout, [&] {
    const Impl::Connection* c = impl_->find(connection);
    return c != nullptr && c->client_pings >= n;
  });
}

std::size_t H2TestServer::ping_acks(std::uint64_t connection) const {
  std::lock_guard lock(impl_->mu);
  const Impl::Connection* c = impl_->find(connection);
  return c == nullptr ? 0 : c->ping_acks;
}

bool H2TestServer::connection_open(std::uint64_t connection) const {
  std::lock_guard lock(impl_->mu);
  const Impl::Connection* c = impl_->find(connection);
  return c != nullptr && c->open;
}

bool H2TestServer::wait_connection_closed(std::uint64_t connection,
                                          std::chrono::milliseconds timeout) const {
  std::unique_lock lock(impl_->mu);
  return impl_->cv.wait_for(lock, timeout, [&] {
    const Impl::Connection* c = impl_->find(connection);
    return c != nullptr && c->client_closed;
  });
}

void H2TestServer::set_answer_pings(bool answer) {
  std::lock_guard lock(impl_->mu);
  impl_->answer_pings = answer;
}

void H2TestServer::goaway(std::uint64_t connection, std::uint32_t last_stream_id,
                          client::detail::ErrorCode code, std::string debug_data) {
  impl_->command(connection, {Impl::Command::goaway, last_stream_id, code, std::move(debug_data)},
                 "goaway");
}

void H2TestServer::close(std::uint64_t connection) {
  impl_->command(connection, {Impl::Command::close, 0, ErrorCode::no_error, {}}, "close");
}

void H2TestServer::ping(std::uint64_t connection) {
  impl_->command(connection, {Impl::Command::ping, 0, ErrorCode::no_error, {}}, "ping");
}

}  // namespace kinformer::testing
