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
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <algorithm>
#include <cctype>
#include <thread>

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

template <class Stream>
struct Conn {
  explicit Conn(Stream s) : stream(std::move(s)) {}
  Stream stream;
  beast::flat_buffer buf;
};

using SslStream = beast::ssl_stream<beast::tcp_stream>;

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

  template <class Stream>
  static void close_hard(std::shared_ptr<Conn<Stream>>& conn) {
    beast::error_code ec;
    beast::get_lowest_layer(conn->stream).socket().close(ec);
  }

  template <class Stream>
  static void close_graceful(std::shared_ptr<Conn<Stream>>& conn) {
    beast::error_code ec;
    beast::get_lowest_layer(conn->stream).socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  template <class Stream>
  awaitable<void> stream_reply(std::shared_ptr<Conn<Stream>> conn, Reply reply, unsigned version) {
    auto stream = reply.stream;
    http::response<http::empty_body> res{static_cast<http::status>(reply.status), version};
    for (const auto& [k, v] : reply.headers) res.insert(k, v);
    res.chunked(true);
    http::response_serializer<http::empty_body> sr{res};
    auto [hec, hn] = co_await http::async_write_header(conn->stream, sr, kTuple);
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
            char scratch[1024];
            for (;;) {
              auto [ec, n] = co_await conn->stream.async_read_some(asio::buffer(scratch), kTuple);
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
          auto [ec, n] =
              op->kind == ScriptedStream::Op::data
                  ? co_await asio::async_write(conn->stream,
                                               http::make_chunk(asio::buffer(op->bytes)), kTuple)
                  : co_await asio::async_write(conn->stream, asio::buffer(op->bytes), kTuple);
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
          co_await asio::async_write(conn->stream, http::make_chunk_last(), kTuple);
          close_graceful(conn);
          break;
        } else {
          break;
        }
      }
    }
    *serving = false;
    close_hard(conn);
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

  template <class Stream>
  awaitable<void> serve(std::shared_ptr<Conn<Stream>> conn, std::uint64_t connection) {
    for (;;) {
      http::request_parser<http::string_body> parser;
      parser.body_limit(64 << 20);
      auto [ec, n] = co_await http::async_read(conn->stream, conn->buf, parser, kTuple);
      if (ec) break;
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
      http::response<http::string_body> res{static_cast<http::status>(reply.status), req.version()};
      for (const auto& [k, v] : reply.headers) res.insert(k, v);
      res.body() = std::move(reply.body);
      res.keep_alive(req.keep_alive());
      res.prepare_payload();
      auto [wec, wn] = co_await http::async_write(conn->stream, res, kTuple);
      if (wec || !res.keep_alive() || reply.close_after) break;
    }
    close_graceful(conn);
    close_hard(conn);
  }

  awaitable<void> session(tcp::socket socket) {
    OpenGuard guard(this);
    const std::uint64_t connection = ++accepted;
    if (tls) {
      auto conn = std::make_shared<Conn<SslStream>>(SslStream(std::move(socket), *ssl_ctx));
      beast::get_lowest_layer(conn->stream).expires_after(std::chrono::seconds(10));
      auto [ec] = co_await conn->stream.async_handshake(ssl::stream_base::server, kTuple);
      if (ec) co_return;
      beast::get_lowest_layer(conn->stream).expires_never();
      co_await serve(std::move(conn), connection);
    } else {
      auto conn = std::make_shared<Conn<beast::tcp_stream>>(beast::tcp_stream(std::move(socket)));
      co_await serve(std::move(conn), connection);
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
