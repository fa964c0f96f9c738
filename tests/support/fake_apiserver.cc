#include "fake_apiserver.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/string_body.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <thread>
#include <tuple>
#include <type_traits>

namespace kinformer::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using asio::awaitable;
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string percent_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out.push_back(' ');
    } else if (s[i] == '%' && i + 2 < s.size() &&
               std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
               std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out.push_back(static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

std::string json_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(c);
        }
    }
  }
  return out;
}

using ReadResult = std::tuple<beast::error_code, std::size_t>;

// One accepted connection, plain or TLS. The HTTP layer above is written once against this
// interface (requests parsed from read_some, replies written as preformatted bytes), so none of
// Beast's composed HTTP operations is instantiated per stream type.
class Conn {
 public:
  virtual ~Conn() = default;
  // Reads what is there (at least one byte) into `into`.
  virtual awaitable<ReadResult> read_some(asio::mutable_buffer into) = 0;
  // Writes every byte of `buffers`.
  virtual awaitable<ReadResult> write(std::vector<asio::const_buffer> buffers) = 0;
  virtual tcp::socket& socket() = 0;

  // Closes the socket at once: the client sees a reset or an end mid-message.
  void close_hard() {
    beast::error_code ec;
    socket().close(ec);
  }
  // Ends the sending side: the client reads an orderly end.
  void close_graceful() {
    beast::error_code ec;
    socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  beast::flat_buffer buf;  // bytes read and not parsed yet
};

// A connection over `Stream`: tcp::socket, or a TLS stream over one.
template <class Stream>
class StreamConn final : public Conn {
 public:
  template <class... Args>
  explicit StreamConn(Args&&... args) : stream_(std::forward<Args>(args)...) {}
  awaitable<ReadResult> read_some(asio::mutable_buffer into) override {
    auto result = co_await stream_.async_read_some(into, kTuple);
    co_return result;
  }
  awaitable<ReadResult> write(std::vector<asio::const_buffer> buffers) override {
    auto result = co_await asio::async_write(stream_, buffers, kTuple);
    co_return result;
  }
  tcp::socket& socket() override {
    if constexpr (std::is_same_v<Stream, tcp::socket>) {
      return stream_;
    } else {
      return stream_.next_layer();
    }
  }
  Stream& stream() { return stream_; }

 private:
  Stream stream_;
};
using PlainConn = StreamConn<tcp::socket>;
using TlsConn = StreamConn<ssl::stream<tcp::socket>>;

// The server side of `conn`'s TLS handshake; a client that does not finish it within 10 s is
// dropped. The deadline's wait may run after the handshake ended, or after the connection is
// gone: it closes nothing then.
awaitable<beast::error_code> server_handshake(std::shared_ptr<TlsConn> conn) {
  auto ex = co_await asio::this_coro::executor;
  auto shaking = std::make_shared<bool>(true);
  asio::steady_timer deadline(ex, std::chrono::seconds(10));
  deadline.async_wait([weak = std::weak_ptr<TlsConn>(conn), shaking](beast::error_code ec) {
    auto alive = weak.lock();
    if (!ec && *shaking && alive) alive->close_hard();
  });
  auto [ec] = co_await conn->stream().async_handshake(ssl::stream_base::server, kTuple);
  *shaking = false;
  deadline.cancel();
  co_return ec;
}

// Reads one request into `parser`; false when the connection ended or sent a malformed one.
awaitable<bool> read_request(Conn& conn, http::request_parser<http::string_body>& parser) {
  for (;;) {
    if (conn.buf.size() > 0) {
      beast::error_code ec;
      const std::size_t used = parser.put(conn.buf.data(), ec);
      conn.buf.consume(used);
      if (parser.is_done()) co_return true;
      if (ec && ec != http::error::need_more) co_return false;
      if (!ec && used > 0) continue;  // it took some: it may take more of what is buffered
    }
    auto space = conn.buf.prepare(16 * 1024);
    auto [ec, n] = co_await conn.read_some(space);
    if (ec) co_return false;
    conn.buf.commit(n);
  }
}

// "HTTP/1.1 200 OK\r\n" and the reply's own header fields, without the blank line.
std::string status_and_fields(const Reply& reply, unsigned version) {
  std::string out = version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ";
  out += std::to_string(reply.status);
  out += ' ';
  out += http::obsolete_reason(static_cast<http::status>(reply.status));
  out += "\r\n";
  for (const auto& [k, v] : reply.headers) out.append(k).append(": ").append(v).append("\r\n");
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Request / Reply / ScriptedStream

std::string Request::header(std::string_view name) const {
  auto it = headers.find(lower(name));
  return it == headers.end() ? std::string() : it->second;
}

std::optional<std::string> Request::param(const std::string& name) const {
  auto it = query.find(name);
  if (it == query.end()) return std::nullopt;
  return it->second;
}

Reply Reply::json(std::string body, int status) {
  Reply r;
  r.status = status;
  r.headers.emplace_back("Content-Type", "application/json");
  r.body = std::move(body);
  return r;
}

Reply Reply::api_status(int code, std::string reason, std::string message,
                        std::optional<int> retry_after_seconds) {
  std::string body = R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)";
  body +=
      "\"message\":\"" + json_escape(message) + "\",\"reason\":\"" + json_escape(reason) + "\",";
  if (retry_after_seconds) {
    body += "\"details\":{\"retryAfterSeconds\":" + std::to_string(*retry_after_seconds) + "},";
  }
  body += "\"code\":" + std::to_string(code) + "}";
  Reply r = json(std::move(body), code);
  if (retry_after_seconds)
    r.headers.emplace_back("Retry-After", std::to_string(*retry_after_seconds));
  return r;
}

Reply Reply::text(std::string body, int status) {
  Reply r;
  r.status = status;
  r.headers.emplace_back("Content-Type", "text/plain; charset=utf-8");
  r.body = std::move(body);
  return r;
}

Reply Reply::streaming(std::shared_ptr<ScriptedStream> stream, int status) {
  Reply r;
  r.status = status;
  r.headers.emplace_back("Content-Type", "application/json");
  r.stream = std::move(stream);
  return r;
}

Reply Reply::dropped() {
  Reply r;
  r.drop = true;
  return r;
}

void ReplyGate::open() {
  std::lock_guard lock(mu_);
  open_ = true;
  if (wake_) wake_();
}

void ScriptedStream::push(Op op) {
  std::lock_guard lock(mu_);
  if (closed_) return;
  ops_.push_back(std::move(op));
  if (wake_) wake_();
}

void ScriptedStream::send(std::string bytes) {
  if (bytes.empty()) return;
  push({Op::data, std::move(bytes)});
}
void ScriptedStream::send_raw(std::string bytes) {
  if (bytes.empty()) return;
  push({Op::raw, std::move(bytes)});
}
void ScriptedStream::end() { push({Op::end, {}}); }
void ScriptedStream::abort() { push({Op::abort, {}}); }

bool ScriptedStream::closed() const {
  std::lock_guard lock(mu_);
  return closed_;
}

bool ScriptedStream::wait_closed(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return closed_; });
}

bool ScriptedStream::wait_client_closed(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return client_closed_; });
}

bool ScriptedStream::wait_drained(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return ops_.empty() && !writing_; });
}

std::size_t ScriptedStream::bytes_written() const {
  std::lock_guard lock(mu_);
  return bytes_written_;
}

bool ScriptedStream::wait_started(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return started_ || closed_; });
}

std::string watch_event_line(std::string_view type, std::string_view object_json) {
  std::string line = "{\"type\":\"";
  line.append(type).append("\",\"object\":").append(object_json).append("}\n");
  return line;
}

// ---------------------------------------------------------------------------------------------
// Server

struct FakeApiServer::Impl {
  struct Route {
    std::string method;
    std::string path;
    Handler handler;
  };

  mutable std::mutex mu;
  mutable std::condition_variable cv;
  std::vector<Route> routes;
  std::vector<Request> received;
  std::size_t open = 0;
  std::vector<std::weak_ptr<ScriptedStream>> streams;
  std::vector<std::weak_ptr<ReplyGate>> gates;
  std::uint64_t accepted = 0;  // connections so far (io thread)
  bool tls = false;
  std::uint16_t port = 0;

  std::optional<ssl::context> ssl_ctx;
  asio::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  std::thread thread;

  struct OpenGuard {
    explicit OpenGuard(Impl* i) : impl(i) {
      std::lock_guard lock(impl->mu);
      ++impl->open;
      impl->cv.notify_all();
    }
    ~OpenGuard() {
      std::lock_guard lock(impl->mu);
      --impl->open;
      impl->cv.notify_all();
    }
    Impl* impl;
  };

  Reply dispatch(const Request& request) {
    Handler handler;
    {
      std::lock_guard lock(mu);
      for (auto it = routes.rbegin(); it != routes.rend(); ++it) {
        if (it->method != request.method) continue;
        bool match = !it->path.empty() && it->path.back() == '*'
                         ? request.path.starts_with(
                               std::string_view(it->path).substr(0, it->path.size() - 1))
                         : request.path == it->path;
        if (match) {
          handler = it->handler;
          break;
        }
      }
    }
    if (!handler) {
      return Reply::api_status(404, "NotFound", "the server could not find the requested resource");
    }
    return handler(request);
  }

  void record(Request request) {
    std::lock_guard lock(mu);
    received.push_back(std::move(request));
    cv.notify_all();
  }

  static Request to_request(const http::request<http::string_body>& req) {
    Request r;
    r.method = std::string(req.method_string());
    r.target = std::string(req.target());
    std::string_view target = req.target();
    auto q = target.find('?');
    r.path = percent_decode(target.substr(0, q));
    if (q != std::string_view::npos) {
      std::string_view rest = target.substr(q + 1);
      while (!rest.empty()) {
        auto amp = rest.find('&');
        std::string_view kv = rest.substr(0, amp);
        auto eq = kv.find('=');
        r.query[percent_decode(kv.substr(0, eq))] =
            eq == std::string_view::npos ? std::string() : percent_decode(kv.substr(eq + 1));
        if (amp == std::string_view::npos) break;
        rest = rest.substr(amp + 1);
      }
    }
    for (const auto& field : req)
      r.headers[lower(field.name_string())] = std::string(field.value());
    r.body = req.body();
    return r;
  }

  awaitable<void> stream_reply(std::shared_ptr<Conn> conn, Reply reply, unsigned version) {
    auto stream = reply.stream;
    const std::string head =
        status_and_fields(reply, version) + "Transfer-Encoding: chunked\r\n\r\n";
    std::vector<asio::const_buffer> head_bytes{asio::buffer(head)};
    auto [hec, hn] = co_await conn->write(head_bytes);
    auto ex = co_await asio::this_coro::executor;
    auto timer = std::make_shared<asio::steady_timer>(ex, asio::steady_timer::time_point::max());
    auto client_gone = std::make_shared<bool>(false);
    auto serving = std::make_shared<bool>(true);  // false once this loop stopped serving
    {
      std::lock_guard lock(stream->mu_);
      stream->started_ = true;
      if (!hec) {
        stream->wake_ = [timer, ex] { asio::post(ex, [timer] { timer->cancel(); }); };
      }
      stream->cv_.notify_all();
    }
    {
      std::lock_guard lock(mu);
      streams.push_back(stream);
    }
    if (!hec) {
      // Detects the client hanging up while the test has nothing to send.
      asio::co_spawn(
          ex,
          [conn, timer, client_gone, serving, stream]() -> awaitable<void> {
            std::array<char, 1024> scratch;
            for (;;) {
              auto [ec, n] = co_await conn->read_some(asio::buffer(scratch));
              if (ec) {
                if (*serving) {  // not our own close after end/abort: the client hung up
                  std::lock_guard lock(stream->mu_);
                  stream->client_closed_ = true;
                  stream->cv_.notify_all();
                }
                *client_gone = true;
                timer->cancel();
                co_return;
              }
            }
          },
          asio::detached);
      for (;;) {
        std::optional<ScriptedStream::Op> op;
        {
          std::lock_guard lock(stream->mu_);
          if (!stream->ops_.empty()) {
            op = std::move(stream->ops_.front());
            stream->ops_.pop_front();
            stream->writing_ =
                op->kind == ScriptedStream::Op::data || op->kind == ScriptedStream::Op::raw;
          }
        }
        if (!op) {
          if (*client_gone) break;
          co_await timer->async_wait(kTuple);
          timer->expires_at(asio::steady_timer::time_point::max());
          continue;
        }
        if (op->kind == ScriptedStream::Op::data || op->kind == ScriptedStream::Op::raw) {
          // A data op is one chunk: its size in hex, its bytes, CRLF; a raw op goes as it is.
          std::vector<asio::const_buffer> out;
          std::string chunk_size;
          if (op->kind == ScriptedStream::Op::data) {
            std::array<char, 20> hex;
            auto [end, err] =
                std::to_chars(hex.data(), hex.data() + hex.size(), op->bytes.size(), 16);
            chunk_size.assign(hex.data(), end);
            chunk_size += "\r\n";
            out = {asio::buffer(chunk_size), asio::buffer(op->bytes), asio::buffer("\r\n", 2)};
          } else {
            out = {asio::buffer(op->bytes)};
          }
          auto [ec, n] = co_await conn->write(out);
          {
            std::lock_guard lock(stream->mu_);
            stream->writing_ = false;
            if (!ec) stream->bytes_written_ += op->bytes.size();
            if (ec) stream->client_closed_ = true;  // a failed write: the client is gone
            stream->cv_.notify_all();
          }
          if (ec) break;
        } else if (op->kind == ScriptedStream::Op::end) {
          *serving = false;  // from here on a read error is our own close
          std::vector<asio::const_buffer> last_chunk{asio::buffer("0\r\n\r\n", 5)};
          co_await conn->write(last_chunk);
          conn->close_graceful();
          break;
        } else {
          break;
        }
      }
    }
    *serving = false;
    conn->close_hard();
    std::lock_guard lock(stream->mu_);
    stream->wake_ = nullptr;
    stream->closed_ = true;
    stream->cv_.notify_all();
  }

  // Returns once `gate` is open; other connections are served meanwhile.
  awaitable<void> wait_open(std::shared_ptr<ReplyGate> gate) {
    {
      std::lock_guard lock(mu);
      gates.push_back(gate);
    }
    auto ex = co_await asio::this_coro::executor;
    auto timer = std::make_shared<asio::steady_timer>(ex, asio::steady_timer::time_point::max());
    for (;;) {
      {
        std::lock_guard lock(gate->mu_);
        if (gate->open_) {
          gate->wake_ = nullptr;
          break;
        }
        // Posted: it runs after this coroutine started waiting below (one io thread).
        gate->wake_ = [timer, ex] { asio::post(ex, [timer] { timer->cancel(); }); };
      }
      co_await timer->async_wait(kTuple);
    }
  }

  awaitable<void> serve(std::shared_ptr<Conn> conn, std::uint64_t connection) {
    for (;;) {
      http::request_parser<http::string_body> parser;
      parser.body_limit(64 << 20);
      parser.eager(true);
      const bool got = co_await read_request(*conn, parser);
      if (!got) break;
      const auto& req = parser.get();
      Request request = to_request(req);
      request.connection = connection;
      Reply reply = dispatch(request);
      record(std::move(request));
      if (reply.drop) break;
      if (reply.gate) co_await wait_open(reply.gate);
      if (reply.stream) {
        co_await stream_reply(conn, std::move(reply), req.version());
        co_return;
      }
      // As a keep-alive HTTP/1.1 server writes it: Connection only when it differs from the
      // version's default, Content-Length unless the status never has a body.
      const bool keep_alive = req.keep_alive();
      std::string head = status_and_fields(reply, req.version());
      if (req.version() >= 11 && !keep_alive) head += "Connection: close\r\n";
      if (req.version() < 11 && keep_alive) head += "Connection: keep-alive\r\n";
      const bool bodiless = reply.status / 100 == 1 || reply.status == 204 || reply.status == 304;
      if (bodiless) reply.body.clear();  // a body there would be read as the next reply
      if (!bodiless) head += "Content-Length: " + std::to_string(reply.body.size()) + "\r\n";
      head += "\r\n";
      std::vector<asio::const_buffer> bytes{asio::buffer(head), asio::buffer(reply.body)};
      auto [wec, wn] = co_await conn->write(bytes);
      if (wec || !keep_alive || reply.close_after) break;
    }
    conn->close_graceful();
    conn->close_hard();
  }

  awaitable<void> session(tcp::socket socket) {
    OpenGuard guard(this);
    const std::uint64_t connection = ++accepted;
    if (tls) {
      auto conn = std::make_shared<TlsConn>(std::move(socket), *ssl_ctx);
      const beast::error_code ec = co_await server_handshake(conn);
      if (ec) co_return;
      co_await serve(std::move(conn), connection);
    } else {
      co_await serve(std::make_shared<PlainConn>(std::move(socket)), connection);
    }
  }

  awaitable<void> listen() {
    for (;;) {
      auto [ec, socket] = co_await acceptor.async_accept(kTuple);
      if (ec) co_return;
      asio::co_spawn(ioc, session(std::move(socket)), asio::detached);
    }
  }
};

FakeApiServer::FakeApiServer(FakeApiServerOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->tls = options.tls;
  if (options.tls) {
    pki_ = options.pki ? *options.pki : make_pki();
    auto& ctx = impl_->ssl_ctx.emplace(ssl::context::tls_server);
    ctx.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                    ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
    ctx.use_certificate_chain(asio::buffer(pki_.server.cert_pem));
    ctx.use_private_key(asio::buffer(pki_.server.key_pem), ssl::context::pem);
    if (options.require_client_cert) {
      ctx.add_certificate_authority(asio::buffer(pki_.ca.cert_pem));
      ctx.set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
    }
  }
  tcp::endpoint endpoint(asio::ip::make_address("127.0.0.1"), 0);
  impl_->acceptor.open(endpoint.protocol());
  impl_->acceptor.set_option(tcp::acceptor::reuse_address(true));
  impl_->acceptor.bind(endpoint);
  impl_->acceptor.listen();
  impl_->port = impl_->acceptor.local_endpoint().port();
  asio::co_spawn(impl_->ioc, impl_->listen(), asio::detached);
  impl_->thread = std::thread([impl = impl_.get()] { impl->ioc.run(); });
}

FakeApiServer::~FakeApiServer() {
  impl_->ioc.stop();
  impl_->thread.join();
  std::vector<std::shared_ptr<ScriptedStream>> streams;
  {
    std::lock_guard lock(impl_->mu);
    for (auto& weak : impl_->streams) {
      if (auto s = weak.lock()) streams.push_back(std::move(s));
    }
  }
  for (auto& s : streams) {
    std::lock_guard lock(s->mu_);
    s->wake_ = nullptr;
    s->closed_ = true;
    s->cv_.notify_all();
  }
  std::vector<std::shared_ptr<ReplyGate>> gates;
  {
    std::lock_guard lock(impl_->mu);
    for (auto& weak : impl_->gates) {
      if (auto g = weak.lock()) gates.push_back(std::move(g));
    }
  }
  for (auto& g : gates) {
    std::lock_guard lock(g->mu_);
    g->wake_ = nullptr;  // its io_context is going away
  }
}

std::string FakeApiServer::url() const {
  return std::string(impl_->tls ? "https" : "http") + "://127.0.0.1:" + std::to_string(impl_->port);
}

std::uint16_t FakeApiServer::port() const { return impl_->port; }

void FakeApiServer::on(std::string method, std::string path, Handler handler) {
  std::lock_guard lock(impl_->mu);
  impl_->routes.push_back({std::move(method), std::move(path), std::move(handler)});
}

std::vector<Request> FakeApiServer::requests() const {
  std::lock_guard lock(impl_->mu);
  return impl_->received;
}

std::size_t FakeApiServer::request_count() const {
  std::lock_guard lock(impl_->mu);
  return impl_->received.size();
}

bool FakeApiServer::wait_for_requests(std::size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(impl_->mu);
  return impl_->cv.wait_for(lock, timeout, [&] { return impl_->received.size() >= n; });
}

std::size_t FakeApiServer::open_connections() const {
  std::lock_guard lock(impl_->mu);
  return impl_->open;
}

bool FakeApiServer::wait_for_open_connections(std::size_t n,
                                              std::chrono::milliseconds timeout) const {
  std::unique_lock lock(impl_->mu);
  return impl_->cv.wait_for(lock, timeout, [&] { return impl_->open == n; });
}

client::ClusterConfig FakeApiServer::cluster_config(
    client::CredentialsProviderPtr credentials) const {
  client::ClusterConfig config;
  config.server = url();
  config.ca_pem = pki_.ca.cert_pem;
  config.credentials = std::move(credentials);
  config.context = "fake-apiserver";
  return config;
}

}  // namespace kinformer::testing
