#include "transport.h"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

#include "kinformer/client/api_error.h"
#include "kinformer/client/watch_decoder.h"

namespace kinformer::client::detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using asio::awaitable;
using beast::error_code;
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

namespace {

struct ServerUrl {
  bool tls = true;
  std::string host;
  std::string port;
  std::string prefix;  // path prefix without trailing '/'
};

ServerUrl parse_server(const std::string& server) {
  ServerUrl url;
  std::string_view s = server;
  if (s.starts_with("https://")) {
    s.remove_prefix(8);
  } else if (s.starts_with("http://")) {
    url.tls = false;
    s.remove_prefix(7);
  } else {
    throw ConfigError("server '" + server + "': expected an https:// or http:// URL");
  }
  auto slash = s.find('/');
  std::string_view authority = s.substr(0, slash);
  if (slash != std::string_view::npos) url.prefix = std::string(s.substr(slash));
  while (!url.prefix.empty() && url.prefix.back() == '/') url.prefix.pop_back();
  if (authority.starts_with('[')) {
    auto close = authority.find(']');
    if (close == std::string_view::npos) throw ConfigError("server '" + server + "': unterminated IPv6 address");
    url.host = std::string(authority.substr(1, close - 1));
    if (close + 1 < authority.size() && authority[close + 1] == ':') url.port = authority.substr(close + 2);
  } else {
    auto colon = authority.rfind(':');
    url.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) url.port = authority.substr(colon + 1);
  }
  if (url.host.empty()) throw ConfigError("server '" + server + "': missing host");
  if (url.port.empty()) url.port = url.tls ? "443" : "80";
  return url;
}

struct Connection {
  Connection(asio::any_io_executor ex, std::shared_ptr<ssl::context> context) : ctx(std::move(context)) {
    if (ctx) {
      tls.emplace(ex, *ctx);
    } else {
      plain.emplace(ex);
    }
  }
  beast::tcp_stream& lowest() { return tls ? beast::get_lowest_layer(*tls) : *plain; }
  void close() {
    error_code ec;
    lowest().socket().shutdown(tcp::socket::shutdown_both, ec);
    lowest().socket().close(ec);
  }
  std::shared_ptr<ssl::context> ctx;  // outlives tls
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls;
  std::optional<beast::tcp_stream> plain;
  beast::flat_buffer buffer;
  std::string cert_id;
};

using ConnectionPtr = std::shared_ptr<Connection>;

Error from_ec(const error_code& ec, const std::string& what) {
  Errc code = Errc::network;
  if (ec == beast::error::timeout) {
    code = Errc::timeout;
  } else if (ec == asio::error::operation_aborted) {
    code = Errc::cancelled;
  } else if (ec.category() == asio::error::get_ssl_category() || ec == ssl::error::stream_truncated) {
    code = Errc::tls;
  } else if (ec == http::error::body_limit) {
    code = Errc::too_large;
  }
  return Error::make(code, what + ": " + ec.message());
}

// Safe to send again when a reused connection failed: only the safe methods. The server may
// have applied the request before closing: a replayed PUT without a resourceVersion overwrites
// a newer write, and a replayed DELETE can delete an object recreated under the same name.
bool replayable(http::verb method) {
  return method == http::verb::get || method == http::verb::head || method == http::verb::options;
}

bool is_ip(const std::string& host) {
  error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

template <class Stream>
awaitable<error_code> write_read(Stream& stream, beast::flat_buffer& buffer, http::request<http::string_body>& req,
                                 http::response_parser<http::string_body>& parser) {
  auto [wec, wn] = co_await http::async_write(stream, req, kTuple);
  if (wec) co_return wec;
  auto [rec, rn] = co_await http::async_read(stream, buffer, parser, kTuple);
  co_return rec;
}

template <class Stream>
awaitable<error_code> write_header(Stream& stream, beast::flat_buffer& buffer, http::request<http::string_body>& req,
                                   http::response_parser<http::buffer_body>& parser) {
  auto [wec, wn] = co_await http::async_write(stream, req, kTuple);
  if (wec) co_return wec;
  auto [rec, rn] = co_await http::async_read_header(stream, buffer, parser, kTuple);
  co_return rec;
}

template <class Stream>
awaitable<error_code> read_some(Stream& stream, beast::flat_buffer& buffer, http::response_parser<http::buffer_body>& parser) {
  auto [ec, n] = co_await http::async_read_some(stream, buffer, parser, kTuple);
  co_return ec;
}

// The read-idle deadline of a watch: the configured one, else timeoutSeconds + 60 s from the
// request's query, else 10 min.
std::chrono::milliseconds watch_idle_timeout(std::chrono::milliseconds configured, std::string_view target) {
  using namespace std::chrono;
  if (configured > milliseconds::zero()) return configured;
  auto q = target.find('?');
  std::string_view query = q == std::string_view::npos ? std::string_view() : target.substr(q + 1);
  while (!query.empty()) {
    auto amp = query.find('&');
    std::string_view kv = query.substr(0, amp);
    constexpr std::string_view kKey = "timeoutSeconds=";
    if (kv.starts_with(kKey)) {
      std::int64_t secs = 0;
      auto v = kv.substr(kKey.size());
      auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), secs);
      if (ec == std::errc() && ptr == v.data() + v.size() && secs > 0 && secs < (std::int64_t{1} << 31)) {
        return duration_cast<milliseconds>(seconds(secs) + seconds(60));
      }
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return duration_cast<milliseconds>(minutes(10));
}

// "30s", "0.2s", "1.5s".
std::string format_seconds(std::chrono::milliseconds d) {
  auto ms = d.count();
  std::string out = std::to_string(ms / 1000);
  if (auto frac = ms % 1000; frac != 0) {
    std::string f = std::to_string(1000 + frac).substr(1);
    while (f.back() == '0') f.pop_back();
    out += "." + f;
  }
  return out + "s";
}

std::vector<std::pair<std::string, std::string>> copy_headers(const http::fields& fields) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& f : fields) out.emplace_back(std::string(f.name_string()), std::string(f.value()));
  return out;
}

std::string header_value(const HttpResponse& r, std::string_view name) {
  for (const auto& [k, v] : r.headers) {
    if (beast::iequals(k, name)) return v;
  }
  return {};
}

// Shared between a WatchStreamImpl (reader thread) and its coroutine (io thread).
struct WatchState {
  std::mutex mu;
  std::condition_variable cv;
  struct Queued {
    WatchEvent event;
    std::size_t bytes;  // its share of the received lines
  };
  std::deque<Queued> events;
  std::size_t queued_bytes = 0;  // sum of events[].bytes
  std::optional<Error> error;
  bool ended = false;
  bool cancelled = false;
  bool paused = false;
  bool opened = false;
  std::optional<Error> open_error;
  HttpResponse head;
  std::size_t limit = 4096;
  std::size_t bytes_limit = std::size_t{64} << 20;
  asio::any_io_executor ex;
  // io thread only
  ConnectionPtr conn;
  std::optional<asio::steady_timer> pause_timer;

  // The reader is far behind: stop reading the socket (guarded by mu).
  bool full() const { return events.size() >= limit || queued_bytes >= bytes_limit; }
  // It has caught up far enough to read again (guarded by mu).
  bool drained() const { return events.size() <= limit / 2 && queued_bytes <= bytes_limit / 2; }

  void cancel_io() {
    if (conn) conn->close();
    if (pause_timer) pause_timer->cancel();
  }
};

class WatchStreamImpl final : public WatchStream {
 public:
  WatchStreamImpl(std::shared_ptr<Transport> transport, std::shared_ptr<WatchState> state)
      : transport_(std::move(transport)), state_(std::move(state)) {}
  ~WatchStreamImpl() override { cancel(); }

  Result<std::optional<WatchEvent>> next() override {
    std::unique_lock lock(state_->mu);
    state_->cv.wait(lock, [&] {
      return state_->cancelled || !state_->events.empty() || state_->error || state_->ended;
    });
    if (state_->cancelled) return Error::make(Errc::cancelled, "watch cancelled");
    if (!state_->events.empty()) {
      WatchEvent event = std::move(state_->events.front().event);
      state_->queued_bytes -= state_->events.front().bytes;
      state_->events.pop_front();
      if (state_->paused && state_->drained()) {
        state_->paused = false;
        asio::post(state_->ex, [st = state_] {
          if (st->pause_timer) st->pause_timer->cancel();
        });
      }
      return std::optional<WatchEvent>(std::move(event));
    }
    if (state_->error) return *state_->error;
    return std::optional<WatchEvent>();
  }

  void cancel() override {
    {
      std::lock_guard lock(state_->mu);
      if (state_->cancelled) return;
      state_->cancelled = true;
      state_->cv.notify_all();
    }
    asio::post(state_->ex, [st = state_] { st->cancel_io(); });
  }

 private:
  std::shared_ptr<Transport> transport_;  // keeps the io thread alive; destroyed after state_
  std::shared_ptr<WatchState> state_;
};

}  // namespace

struct Transport::Impl {
  ClusterConfig config;
  TransportOptions options;
  ServerUrl url;
  std::string verify_name;
  bool verify_is_ip = false;
  std::string host_header;

  std::mutex ctx_mu;
  std::size_t ctx_cert_id = 0;
  std::shared_ptr<ssl::context> ctx;

  asio::io_context ioc{1};
  asio::executor_work_guard<asio::io_context::executor_type> work{ioc.get_executor()};
  std::thread thread;
  std::vector<ConnectionPtr> idle;  // io thread only

  Result<std::shared_ptr<ssl::context>> context_for(const Credentials& credentials, std::size_t& cert_id) {
    if (!url.tls) return std::shared_ptr<ssl::context>();
    cert_id = credentials.client_cert_pem.empty()
                  ? 0
                  : std::hash<std::string>()(credentials.client_cert_pem + "\n" + credentials.client_key_pem);
    std::lock_guard lock(ctx_mu);
    if (ctx && ctx_cert_id == cert_id) return ctx;
    auto made = make_context(credentials);
    if (!made) return made;
    ctx = made.value();
    ctx_cert_id = cert_id;
    return ctx;
  }

  Result<std::shared_ptr<ssl::context>> make_context(const Credentials& credentials) {
    auto c = std::make_shared<ssl::context>(ssl::context::tls_client);
    SSL_CTX_set_min_proto_version(c->native_handle(), TLS1_2_VERSION);
    error_code ec;
    if (config.insecure_skip_tls_verify) {
      c->set_verify_mode(ssl::verify_none);
    } else {
      c->set_verify_mode(ssl::verify_peer);
      if (!config.ca_pem.empty()) {
        c->add_certificate_authority(asio::buffer(config.ca_pem), ec);
        if (ec) return Error::make(Errc::tls, "certificate-authority: not a valid PEM certificate bundle");
      } else {
        c->set_default_verify_paths(ec);
      }
    }
    if (!credentials.client_cert_pem.empty()) {
      c->use_certificate_chain(asio::buffer(credentials.client_cert_pem), ec);
      if (ec) return Error::make(Errc::auth, "client certificate: not a valid PEM certificate");
      c->use_private_key(asio::buffer(credentials.client_key_pem), ssl::context::pem, ec);
      if (ec) return Error::make(Errc::auth, "client key: not a valid PEM private key matching the certificate");
    }
    return c;
  }

  // Resolves the server's host within `deadline`. Asio runs getaddrinfo() on a thread of its
  // own and cannot interrupt it (resolver::cancel() only drops queries not yet started), so the
  // coroutine waits for whichever comes first, the answer or the deadline; a late answer lands in
  // the shared state and is dropped.
  awaitable<Result<tcp::resolver::results_type>> resolve(
      asio::any_io_executor ex, std::chrono::steady_clock::time_point deadline) {
    struct Pending {
      Pending(asio::any_io_executor ex, std::chrono::steady_clock::time_point deadline)
          : resolver(ex), timer(ex, deadline) {}
      tcp::resolver resolver;
      asio::steady_timer timer;  // fires at the deadline, or is cancelled by the answer
      std::optional<std::pair<error_code, tcp::resolver::results_type>> answer;
    };
    auto pending = std::make_shared<Pending>(ex, deadline);
    pending->resolver.async_resolve(url.host, url.port,
                                    [pending](error_code ec, tcp::resolver::results_type results) {
                                      pending->answer.emplace(ec, std::move(results));
                                      pending->timer.cancel();
                                    });
    co_await pending->timer.async_wait(kTuple);
    if (!pending->answer) {
      pending->resolver.cancel();
      co_return Error::make(Errc::timeout,
                            "resolve " + url.host + ": no answer within the request deadline");
    }
    auto& [ec, results] = *pending->answer;
    if (ec) co_return from_ec(ec, "resolve " + url.host);
    co_return results;
  }

  // Connects to the first endpoint of `results` that accepts, within the stream's deadline, on a
  // socket opened close-on-exec (Asio's own open() leaves it inheritable). A child process that
  // inherited a connection (an exec credential plugin, or anything the embedding program runs)
  // would keep it open after we close it: a closed watch would go on being served.
  static awaitable<error_code> connect_close_on_exec(beast::tcp_stream& stream,
                                                     const tcp::resolver::results_type& results) {
    error_code last = asio::error::host_not_found;
    for (const auto& entry : results) {
      const tcp::endpoint ep = entry.endpoint();
      error_code ec;
      stream.socket().close(ec);
      const int fd = ::socket(ep.protocol().family(), SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP);
      if (fd < 0) {
        last = error_code(errno, boost::system::system_category());
        continue;
      }
      stream.socket().assign(ep.protocol(), fd, ec);
      if (ec) {
        ::close(fd);
        last = ec;
        continue;
      }
      auto [cec] = co_await stream.async_connect(ep, kTuple);
      if (!cec) co_return cec;
      last = cec;
      if (cec == beast::error::timeout || cec == asio::error::operation_aborted) break;  // the deadline is for all
    }
    co_return last;
  }

  awaitable<Result<ConnectionPtr>> connect(std::shared_ptr<ssl::context> context, std::size_t cert_id,
                                           std::chrono::steady_clock::time_point deadline) {
    auto ex = co_await asio::this_coro::executor;
    auto resolved = co_await resolve(ex, deadline);
    if (!resolved) co_return std::move(resolved).error();
    const tcp::resolver::results_type& results = resolved.value();
    auto conn = std::make_shared<Connection>(ex, context);
    conn->cert_id = std::to_string(cert_id);
    conn->lowest().expires_at(deadline);
    error_code cec = co_await connect_close_on_exec(conn->lowest(), results);
    if (cec) co_return from_ec(cec, "connect to " + url.host + ":" + url.port);
    error_code ignored;
    conn->lowest().socket().set_option(tcp::no_delay(true), ignored);
    if (conn->tls) {
      SSL* ssl = conn->tls->native_handle();
      if (!verify_is_ip) SSL_set_tlsext_host_name(ssl, verify_name.c_str());
      if (!config.insecure_skip_tls_verify) {
        X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
        X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        // OpenSSL refuses some names (a scoped IPv6 literal such as fe80::1%eth0, a name with a
        // NUL); going on would verify the chain only, so such a name fails the connection.
        int set = verify_is_ip
                      ? X509_VERIFY_PARAM_set1_ip_asc(param, verify_name.c_str())
                      : X509_VERIFY_PARAM_set1_host(param, verify_name.c_str(), verify_name.size());
        if (set != 1) {
          co_return Error::make(
              Errc::tls, "TLS server name '" + verify_name + "' (" + url.host + ":" + url.port +
                             "): OpenSSL cannot check a certificate against this " +
                             (verify_is_ip ? "IP address" : "host name"));
        }
      }
      auto [hec] = co_await conn->tls->async_handshake(ssl::stream_base::client, kTuple);
      if (hec) {
        long verify = SSL_get_verify_result(ssl);
        std::string what = "TLS handshake with " + verify_name + " (" + url.host + ":" + url.port + ") failed";
        if (verify != X509_V_OK) {
          co_return Error::make(Errc::tls, what + ": certificate verify failed: " + X509_verify_cert_error_string(verify));
        }
        Error e = from_ec(hec, what);
        if (e.code != Errc::timeout && e.code != Errc::cancelled) e.code = Errc::tls;
        co_return e;
      }
    }
    co_return conn;
  }

  http::request<http::string_body> build(const HttpRequest& request, const Credentials& credentials) {
    http::request<http::string_body> req;
    req.method_string(request.method);
    req.target(url.prefix + request.target);
    req.version(11);
    req.set(http::field::host, host_header);
    req.set(http::field::user_agent, options.user_agent);
    if (!request.accept.empty()) req.set(http::field::accept, request.accept);
    if (!credentials.token.empty()) req.set(http::field::authorization, "Bearer " + credentials.token);
    if (!request.body.empty() || request.method == "POST" || request.method == "PUT" || request.method == "PATCH") {
      if (!request.content_type.empty()) req.set(http::field::content_type, request.content_type);
      req.body() = request.body;
    }
    req.keep_alive(true);
    req.prepare_payload();
    return req;
  }

  awaitable<Result<HttpResponse>> do_request(http::request<http::string_body> req, std::shared_ptr<ssl::context> context,
                                             std::size_t cert_id, std::chrono::steady_clock::time_point deadline) {
    std::string what = std::string(req.method_string()) + " " + std::string(req.target());
    std::string id = std::to_string(cert_id);
    for (int attempt = 0; attempt < 2; ++attempt) {
      ConnectionPtr conn;
      bool reused = false;
      while (!idle.empty()) {
        ConnectionPtr c = std::move(idle.back());
        idle.pop_back();
        if (c->cert_id == id && c->ctx == context) {
          conn = std::move(c);
          reused = true;
          break;
        }
        c->close();
      }
      if (!conn) {
        auto made = co_await connect(context, cert_id, deadline);
        if (!made) co_return std::move(made).error();
        conn = made.value();
      }
      conn->lowest().expires_at(deadline);
      http::response_parser<http::string_body> parser;
      parser.body_limit(options.max_response_bytes);
      error_code ec = conn->tls ? co_await write_read(*conn->tls, conn->buffer, req, parser)
                                : co_await write_read(*conn->plain, conn->buffer, req, parser);
      if (ec) {
        conn->close();
        if (reused && !parser.got_some() && ec != beast::error::timeout) {
          // A kept-alive connection the server closed meanwhile. The server may still have
          // processed the request before closing, so only a safe one is retried (once, on a
          // fresh connection); anything else could otherwise be applied twice.
          if (replayable(req.method())) continue;
          co_return Error::make(
              Errc::network,
              what + ": kept-alive connection closed by the server (" + ec.message() +
                  "); not retried: " + std::string(req.method_string()) + " is not safe to replay");
        }
        if (ec == http::error::body_limit) {
          co_return Error::make(Errc::too_large, what + ": response body exceeds max_response_bytes (" +
                                                     std::to_string(options.max_response_bytes) + " bytes)");
        }
        co_return from_ec(ec, what);
      }
      auto& res = parser.get();
      HttpResponse out;
      out.status = static_cast<int>(res.result_int());
      out.headers = copy_headers(res.base());
      out.body = std::move(res.body());
      if (res.keep_alive() && idle.size() < options.max_idle_connections) {
        conn->lowest().expires_never();
        idle.push_back(std::move(conn));
      } else {
        conn->close();
      }
      co_return out;
    }
    co_return Error::make(Errc::network, what + ": connection closed by the server");
  }

  template <class Stream>
  awaitable<void> stream_body(std::shared_ptr<WatchState> st, Stream& stream, http::response_parser<http::buffer_body>& parser,
                              std::shared_ptr<const Codec> codec, std::chrono::milliseconds idle_timeout) {
    Connection& conn = *st->conn;
    WatchDecoder decoder(std::move(codec), WatchDecoder::Options{options.max_watch_event_bytes});
    std::vector<char> chunk(64 * 1024);
    std::vector<WatchEvent> events;
    std::optional<Error> failure;
    for (;;) {
      if (parser.is_done()) {
        if (auto s = decoder.finish(); !s) failure = s.error();
        break;
      }
      parser.get().body().data = chunk.data();
      parser.get().body().size = chunk.size();
      // Read-idle deadline, re-armed for every read (never while paused for flow control).
      conn.lowest().expires_after(idle_timeout);
      error_code ec = co_await read_some(stream, conn.buffer, parser);
      conn.lowest().expires_never();
      if (ec == http::error::need_buffer) ec = {};
      std::size_t got = chunk.size() - parser.get().body().size;
      Status fed = Ok{};
      std::uint64_t complete_before = decoder.complete_line_bytes();
      if (got > 0) fed = decoder.feed(std::string_view(chunk.data(), got), events);
      // The lines completed by this read, shared out among its events (the last takes the rest).
      auto batch_bytes = static_cast<std::size_t>(decoder.complete_line_bytes() - complete_before);
      bool cancelled;
      {
        std::lock_guard lock(st->mu);
        cancelled = st->cancelled;
        for (std::size_t i = 0; i < events.size(); ++i) {
          std::size_t share = batch_bytes / events.size();
          if (i + 1 == events.size()) share = batch_bytes - share * i;
          st->events.push_back({std::move(events[i]), share});
          st->queued_bytes += share;
        }
        if (!events.empty()) st->cv.notify_all();
      }
      events.clear();
      if (cancelled) {
        failure = Error::make(Errc::cancelled, "watch cancelled");
        break;
      }
      if (!fed) {
        failure = fed.error();
        break;
      }
      if (ec == beast::error::timeout) {
        failure = Error::make(Errc::timeout, "watch idle for " + format_seconds(idle_timeout) +
                                                 ": no data from the server");
        break;
      }
      if (ec) {
        failure = Error::make(Errc::truncated, "watch stream cut short after " + std::to_string(decoder.offset()) +
                                                   " bytes: " + ec.message());
        break;
      }
      // Flow control: stop reading while the reader is far behind.
      for (;;) {
        {
          std::lock_guard lock(st->mu);
          if (st->cancelled || !st->full()) break;
          st->paused = true;
        }
        co_await st->pause_timer->async_wait(kTuple);
        st->pause_timer->expires_at(asio::steady_timer::time_point::max());
      }
    }
    conn.close();
    std::lock_guard lock(st->mu);
    if (failure) {
      st->error = std::move(failure);
    } else {
      st->ended = true;
    }
    st->cv.notify_all();
  }

  awaitable<void> run_watch(std::shared_ptr<WatchState> st, http::request<http::string_body> req,
                            std::shared_ptr<ssl::context> context, std::size_t cert_id,
                            std::chrono::steady_clock::time_point deadline, std::shared_ptr<const Codec> codec) {
    auto fail_open = [&](Error e) {
      std::lock_guard lock(st->mu);
      st->open_error = std::move(e);
      st->cv.notify_all();
    };
    st->pause_timer.emplace(co_await asio::this_coro::executor, asio::steady_timer::time_point::max());
    auto made = co_await connect(context, cert_id, deadline);
    if (!made) {
      fail_open(std::move(made).error());
      co_return;
    }
    st->conn = made.value();
    Connection& conn = *st->conn;
    conn.lowest().expires_at(deadline);
    http::response_parser<http::buffer_body> parser;
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    error_code ec = conn.tls ? co_await write_header(*conn.tls, conn.buffer, req, parser)
                             : co_await write_header(*conn.plain, conn.buffer, req, parser);
    if (ec) {
      conn.close();
      fail_open(from_ec(ec, "WATCH " + std::string(req.target())));
      co_return;
    }
    HttpResponse head;
    head.status = static_cast<int>(parser.get().result_int());
    head.headers = copy_headers(parser.get().base());
    if (head.status != 200) {
      // Read a bounded error body (Status JSON or plain text), then map it.
      std::string body;
      char buf[8192];
      while (!parser.is_done() && body.size() < (1u << 20)) {
        parser.get().body().data = buf;
        parser.get().body().size = sizeof buf;
        error_code rec = conn.tls ? co_await read_some(*conn.tls, conn.buffer, parser)
                                  : co_await read_some(*conn.plain, conn.buffer, parser);
        body.append(buf, sizeof buf - parser.get().body().size);
        if (rec && rec != http::error::need_buffer) break;
      }
      conn.close();
      Error e = error_from_response(head.status, body, header_value(head, "Retry-After"));
      {
        std::lock_guard lock(st->mu);
        st->head = std::move(head);
      }
      fail_open(std::move(e));
      co_return;
    }
    {
      std::lock_guard lock(st->mu);
      st->head = std::move(head);
      st->opened = true;
      st->cv.notify_all();
    }
    conn.lowest().expires_never();
    auto idle_timeout = watch_idle_timeout(options.watch_idle_timeout, req.target());
    if (conn.tls) {
      co_await stream_body(st, *conn.tls, parser, std::move(codec), idle_timeout);
    } else {
      co_await stream_body(st, *conn.plain, parser, std::move(codec), idle_timeout);
    }
  }
};

std::shared_ptr<Transport> Transport::create(const ClusterConfig& config, TransportOptions options) {
  std::shared_ptr<Transport> t(new Transport());
  t->impl_ = std::make_unique<Impl>();
  Impl& impl = *t->impl_;
  impl.config = config;
  impl.options = std::move(options);
  impl.url = parse_server(config.server);
  impl.verify_name = config.tls_server_name.empty() ? impl.url.host : config.tls_server_name;
  impl.verify_is_ip = is_ip(impl.verify_name);
  bool default_port = impl.url.port == (impl.url.tls ? "443" : "80");
  std::string host = impl.url.host.find(':') != std::string::npos ? "[" + impl.url.host + "]" : impl.url.host;
  impl.host_header = default_port ? host : host + ":" + impl.url.port;
  if (impl.url.tls && !config.insecure_skip_tls_verify && !config.ca_pem.empty()) {
    auto probe = impl.make_context({});
    if (!probe) throw ConfigError("server " + config.server + ": " + probe.error().message);
  }
  impl.thread = std::thread([&impl] { impl.ioc.run(); });
  return t;
}

Transport::~Transport() {
  if (!impl_) return;
  asio::post(impl_->ioc, [impl = impl_.get()] {
    for (auto& c : impl->idle) c->close();
    impl->idle.clear();
  });
  impl_->work.reset();
  impl_->ioc.stop();
  if (impl_->thread.get_id() == std::this_thread::get_id()) {
    impl_->thread.detach();  // never join ourselves; the io_context outlives nothing else
  } else if (impl_->thread.joinable()) {
    impl_->thread.join();
  }
  for (auto& c : impl_->idle) c->close();
  impl_->idle.clear();
}

Result<HttpResponse> Transport::request(const HttpRequest& request, const Credentials& credentials) {
  if (impl_->ioc.get_executor().running_in_this_thread()) {
    return Error::make(Errc::network, "RestClient called from its own io thread");
  }
  std::size_t cert_id = 0;
  auto context = impl_->context_for(credentials, cert_id);
  if (!context) return std::move(context).error();
  auto deadline = std::chrono::steady_clock::now() + impl_->options.request_timeout;
  auto promise = std::make_shared<std::promise<Result<HttpResponse>>>();
  auto future = promise->get_future();
  asio::co_spawn(
      impl_->ioc,
      [impl = impl_.get(), promise, req = impl_->build(request, credentials), ctx = context.value(), cert_id,
       deadline]() mutable -> awaitable<void> {
        try {
          promise->set_value(co_await impl->do_request(std::move(req), std::move(ctx), cert_id, deadline));
        } catch (const std::exception& e) {
          promise->set_value(Error::make(Errc::network, std::string("internal error: ") + e.what()));
        }
      },
      asio::detached);
  try {
    return future.get();
  } catch (const std::future_error&) {
    return Error::make(Errc::cancelled, "client is shutting down");
  }
}

Result<WatchStreamPtr> Transport::watch(const HttpRequest& request, const Credentials& credentials,
                                        std::shared_ptr<const Codec> codec,
                                        const std::function<void(const HttpResponse&)>& on_headers) {
  if (impl_->ioc.get_executor().running_in_this_thread()) {
    return Error::make(Errc::network, "RestClient called from its own io thread");
  }
  std::size_t cert_id = 0;
  auto context = impl_->context_for(credentials, cert_id);
  if (!context) return std::move(context).error();
  auto deadline = std::chrono::steady_clock::now() + impl_->options.request_timeout;
  auto st = std::make_shared<WatchState>();
  st->ex = impl_->ioc.get_executor();
  st->limit = std::max<std::size_t>(impl_->options.watch_queue_limit, 2);
  st->bytes_limit = std::max<std::size_t>(impl_->options.watch_queue_bytes_limit, 2);
  asio::co_spawn(
      impl_->ioc,
      [impl = impl_.get(), st, req = impl_->build(request, credentials), ctx = context.value(), cert_id, deadline,
       codec = std::move(codec)]() mutable -> awaitable<void> {
        try {
          co_await impl->run_watch(st, std::move(req), std::move(ctx), cert_id, deadline, std::move(codec));
        } catch (const std::exception& e) {
          std::lock_guard lock(st->mu);
          Error err = Error::make(Errc::network, std::string("internal error: ") + e.what());
          if (st->opened) {
            st->error = err;
          } else {
            st->open_error = err;
          }
          st->cv.notify_all();
        }
      },
      asio::detached);
  HttpResponse head;
  std::optional<Error> open_error;
  {
    std::unique_lock lock(st->mu);
    st->cv.wait(lock, [&] { return st->opened || st->open_error.has_value(); });
    head = st->head;
    open_error = st->open_error;
  }
  if (on_headers && head.status != 0) on_headers(head);
  if (open_error) return *open_error;
  return WatchStreamPtr(std::make_unique<WatchStreamImpl>(shared_from_this(), st));
}

}  // namespace kinformer::client::detail
