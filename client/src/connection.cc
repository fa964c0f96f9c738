#include "connection.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>

#include "gzip.h"

namespace kinformer::client::detail {
namespace {

// Safe to send again when a reused connection failed: only the safe methods. The server may
// have applied the request before closing: a replayed PUT without a resourceVersion overwrites
// a newer write, and a replayed DELETE can delete an object recreated under the same name.
bool replayable(http::verb method) {
  return method == http::verb::get || method == http::verb::head || method == http::verb::options;
}

// An exception from the sink (a codec's bug, bad_alloc while decoding) is a failure to decode
// this body, not of the network: Errc::decode naming the request, where in the body it was and
// the exception; it ends the exchange like an error the sink returns, so the connection, with
// the rest of the body unread, is closed.
Error sink_threw(const std::string& what, const std::string& where, const std::exception& e) {
  return Error::make(Errc::decode,
                     what + ": decoding the response body threw " + where + ": " + e.what());
}

bool sink_accept(const BodySink& sink, const HttpResponse& head, const std::string& what,
                 std::optional<Error>& sink_error) {
  try {
    return sink.accept(head);
  } catch (const std::exception& e) {
    sink_error = sink_threw(what, "on the response head", e);
    return false;
  }
}

void sink_piece(const BodySink& sink, std::string_view piece, std::uint64_t at,
                const std::string& what, std::optional<Error>& sink_error) {
  try {
    if (auto s = sink.piece(piece); !s) sink_error = std::move(s).error();
  } catch (const std::exception& e) {
    sink_error = sink_threw(
        what, "in body bytes " + std::to_string(at) + "-" + std::to_string(at + piece.size()), e);
  }
}

// The Content-Encoding of a response, lower case ("" when absent or "identity"). A body in
// any encoding but gzip is unreadable: the request asks for gzip at most (Accept-Encoding).
std::string content_encoding(const http::fields& fields) {
  auto it = fields.find(http::field::content_encoding);
  if (it == fields.end()) return {};
  std::string v(beast::string_view(it->value()));
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  const auto first = v.find_first_not_of(" \t");
  const auto last = v.find_last_not_of(" \t");
  v = first == std::string::npos ? std::string() : v.substr(first, last - first + 1);
  return v == "identity" ? std::string() : v;
}

// The exchange: the head first; then the body of a 2xx response the sink accepts goes to it
// piece by piece as it arrives (the parser's body limit bounds the total), any other body into
// `out.body`. A gzip-encoded body (Content-Encoding: gzip) is decoded on the way, so the sink
// and `out.body` see the decoded bytes and the head no longer names the encoding (it is in
// `out.content_encoding`); the decoded size is bounded by `max_body` too. `delivered` counts
// the bytes handed to the sink; a sink's error or exception, or a 2xx body that cannot be
// decoded, ends the exchange at once (in `sink_error`, with no error_code). An error response
// (not 2xx) whose body cannot be decoded is read to its end and kept with an empty body: its
// status and headers (401, 429 and Retry-After, 410) still say what happened.
template <class Stream>
awaitable<error_code> write_read(Stream& stream, beast::flat_buffer& buffer,
                                 http::request<http::string_body>& req,
                                 http::response_parser<http::buffer_body>& parser,
                                 const BodySink& sink, const std::string& what,
                                 std::size_t max_body, HttpResponse& out, std::uint64_t& delivered,
                                 std::optional<Error>& sink_error) {
  auto [wec, wn] = co_await http::async_write(stream, req, kTuple);
  if (wec) co_return wec;
  auto [hec, hn] = co_await http::async_read_header(stream, buffer, parser, kTuple);
  if (hec) co_return hec;
  out.status = static_cast<int>(parser.get().result_int());
  const bool success = out.status >= 200 && out.status < 300;
  out.content_encoding = content_encoding(parser.get().base());
  std::optional<GzipDecoder> gzip;
  bool unreadable = false;  // an error response's body that cannot be decoded: discarded
  if (out.content_encoding == "gzip" || out.content_encoding == "x-gzip") {
    gzip.emplace(max_body, what);
    parser.get().erase(http::field::content_encoding);
    parser.get().erase(http::field::content_length);  // the encoded length
  } else if (!out.content_encoding.empty()) {
    if (success) {
      sink_error = Error::make(Errc::decode, what + ": the response body's Content-Encoding '" +
                                                 out.content_encoding +
                                                 "' is not supported (only gzip is asked for)");
      co_return error_code{};
    }
    unreadable = true;
  }
  out.headers = copy_headers(parser.get().base());
  out.body_streamed = success && sink.accept && sink_accept(sink, out, what, sink_error);
  if (sink_error) co_return error_code{};
  // The stated length is the server's word, not bytes: reserve at most 1 MiB of it up front.
  if (!out.body_streamed && !gzip && !unreadable && !parser.is_done()) {
    if (auto n = parser.content_length()) {
      out.body.reserve(std::min<std::uint64_t>({*n, max_body, std::uint64_t{1} << 20}));
    }
  }
  // Decoded bytes to the sink or into out.body; an error once the sink has failed.
  auto emit = [&](std::string_view piece) -> Status {
    if (!out.body_streamed) {
      out.body.append(piece);
      return Ok{};
    }
    sink_piece(sink, piece, delivered, what, sink_error);
    delivered += piece.size();
    if (sink_error) return *sink_error;
    return Ok{};
  };
  // A body that cannot be decoded: the end of a 2xx exchange; an error response keeps its
  // status with an empty body (the rest of it is read and dropped).
  auto undecodable = [&](Error e) {
    if (success || sink_error) {
      if (!sink_error) sink_error = std::move(e);
      return;
    }
    unreadable = true;
    std::string().swap(out.body);  // its memory too
    gzip.reset();
  };
  // The bounded read buffer: what a piece can be at most (beside the connection's own buffer).
  constexpr std::size_t kPiece = std::size_t{64} * 1024;
  const std::unique_ptr<char[]> chunk(new char[kPiece]);
  while (!parser.is_done()) {
    parser.get().body().data = chunk.get();
    parser.get().body().size = kPiece;
    auto [ec, n] = co_await http::async_read_some(stream, buffer, parser, kTuple);
    if (ec == http::error::need_buffer) ec = {};
    const std::size_t got = kPiece - parser.get().body().size;
    if (got > 0 && !unreadable) {
      const std::string_view piece(chunk.get(), got);
      if (gzip) {
        if (auto s = gzip->feed(piece, emit); !s) undecodable(std::move(s).error());
      } else {
        (void)emit(piece);
      }
      if (sink_error) co_return error_code{};
    }
    if (ec) co_return ec;
  }
  if (gzip) {
    if (auto s = gzip->finish(); !s) undecodable(std::move(s).error());
  }
  co_return error_code{};
}

// Connects to the first endpoint of `results` that accepts, within the stream's deadline, on a
// socket opened close-on-exec (Asio's own open() leaves it inheritable). A child process that
// inherited a connection (an exec credential plugin, or anything the embedding program runs)
// would keep it open after we close it: a closed watch would go on being served.
awaitable<error_code> connect_close_on_exec(beast::tcp_stream& stream,
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
    if (cec == beast::error::timeout || cec == asio::error::operation_aborted) {
      break;  // the deadline is for all
    }
  }
  co_return last;
}

// An idle HTTP/1.1 connection has nothing to read: the server sends nothing unasked. Readable
// (or hung up, or in error) means the server closed it or is closing it: its FIN, a TLS
// close_notify, a reset. Zero-timeout poll: no wait, no byte consumed.
bool has_input(Connection& conn) {
  if (conn.buffer.size() != 0 || conn.tls_pending() != 0) return true;
  pollfd p{};
  p.fd = conn.lowest().socket().native_handle();
  p.events = POLLIN;
  return ::poll(&p, 1, 0) != 0;  // < 0 (a failed poll): not worth trusting either
}

// A sink that accepts no body: every body is buffered into HttpResponse::body.
const BodySink kBuffered{};

}  // namespace

Connection::Connection(asio::any_io_executor ex, std::shared_ptr<ssl::context> context)
    : ctx(std::move(context)) {
  if (ctx) {
    tls.emplace(ex, *ctx);
  } else {
    plain.emplace(ex);
  }
}

void Connection::close() {
  // A deadline left armed would fire after the close, possibly while the stream is destroyed
  // on another thread (a watch's last reference is the reader's).
  if (tls) tls->expires_never();
  error_code ec;
  lowest().socket().shutdown(tcp::socket::shutdown_both, ec);
  lowest().socket().close(ec);
}

// Resolves the server's host within `deadline`. Asio runs getaddrinfo() on a thread of its own
// and cannot interrupt it (resolver::cancel() only drops queries not yet started), so the
// coroutine waits for whichever comes first, the answer or the deadline; a late answer lands in
// the shared state and is dropped.
awaitable<Result<tcp::resolver::results_type>> Connector::resolve(
    asio::any_io_executor ex, std::chrono::steady_clock::time_point deadline) {
  // An IP address needs no resolver: Asio runs every resolution of an io_context on one thread,
  // which a hanging lookup of another client on a shared runtime would hold.
  error_code not_ip;
  const auto address = asio::ip::make_address(url_.host, not_ip);
  if (!not_ip) {
    co_return tcp::resolver::results_type::create(
        tcp::endpoint(address, static_cast<std::uint16_t>(std::stoi(url_.port))), url_.host,
        url_.port);
  }
  struct Pending {
    Pending(const asio::any_io_executor& ex, std::chrono::steady_clock::time_point deadline)
        : resolver(ex), timer(ex, deadline) {}
    tcp::resolver resolver;
    asio::steady_timer timer;  // fires at the deadline, or is cancelled by the answer
    std::optional<std::pair<error_code, tcp::resolver::results_type>> answer;
  };
  auto pending = std::make_shared<Pending>(ex, deadline);
  pending->resolver.async_resolve(url_.host, url_.port,
                                  [pending](error_code ec, tcp::resolver::results_type results) {
                                    pending->answer.emplace(ec, std::move(results));
                                    pending->timer.cancel();
                                  });
  co_await pending->timer.async_wait(kTuple);
  if (!pending->answer) {
    pending->resolver.cancel();
    co_return Error::make(Errc::timeout,
                          "resolve " + url_.host + ": no answer within the request deadline");
  }
  auto& [ec, results] = *pending->answer;
  if (ec) co_return from_ec(ec, "resolve " + url_.host);
  co_return results;
}

awaitable<Result<ConnectionPtr>> Connector::connect(std::shared_ptr<ssl::context> context,
                                                    std::size_t cert_id,
                                                    std::chrono::steady_clock::time_point deadline,
                                                    bool offer_h2) {
  auto ex = co_await asio::this_coro::executor;
  auto resolved = co_await resolve(ex, deadline);
  if (!resolved) co_return std::move(resolved).error();
  const tcp::resolver::results_type& results = resolved.value();
  auto conn = std::make_shared<Connection>(ex, context);
  conn->cert_id = std::to_string(cert_id);
  conn->expires_at(deadline);
  error_code cec = co_await connect_close_on_exec(conn->lowest(), results);
  if (cec) co_return from_ec(cec, "connect to " + url_.host + ":" + url_.port);
  error_code ignored;
  conn->lowest().socket().set_option(tcp::no_delay(true), ignored);
  // Best effort: a socket that refuses them still works, and the read-idle deadline remains.
  (void)set_tcp_liveness(conn->lowest().socket().native_handle());
  if (conn->tls) {
    // ALPN's wire form: each protocol name after its length.
    static constexpr unsigned char kH2[] = {2, 'h', '2', 8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
    if (offer_h2 && SSL_set_alpn_protos(conn->tls->native_handle(), kH2, sizeof(kH2)) != 0) {
      co_return Error::make(Errc::tls, "connect to " + url_.host + ":" + url_.port +
                                           ": OpenSSL could not offer h2 by ALPN");
    }
    auto shaken = co_await handshake(*conn->tls, tls_, url_);
    if (!shaken) co_return std::move(shaken).error();
    const unsigned char* chosen = nullptr;
    unsigned int chosen_size = 0;
    SSL_get0_alpn_selected(conn->tls->native_handle(), &chosen, &chosen_size);
    conn->http2 = offer_h2 && chosen_size == 2 && chosen[0] == 'h' && chosen[1] == '2';
  }
  co_return conn;
}

ConnectionPtr ConnectionPool::take_idle(const std::string& cert_id,
                                        const std::shared_ptr<ssl::context>& context) {
  const Clock::TimePoint now = clock_->now();
  while (!idle_.empty()) {
    ConnectionPtr c = std::move(idle_.back());
    idle_.pop_back();
    // The age is checked on our clock, below the server's idle timeout (kube-apiserver: 90 s):
    // one the server is about to close could take a request it never answers.
    if (c->cert_id == cert_id && c->ctx == context && now - c->idle_since < idle_timeout_ &&
        !has_input(*c)) {
      return c;
    }
    c->close();
  }
  return nullptr;
}

awaitable<Result<HttpResponse>> ConnectionPool::request(
    http::request<http::string_body> req, std::shared_ptr<ssl::context> context,
    std::size_t cert_id, std::chrono::steady_clock::time_point deadline, const BodySink* sink) {
  std::string what = std::string(req.method_string()) + " " + std::string(req.target());
  std::string id = std::to_string(cert_id);
  for (int attempt = 0; attempt < 2; ++attempt) {
    // The retry follows a reused connection that proved dead: it goes on a new one.
    ConnectionPtr conn = attempt == 0 ? take_idle(id, context) : nullptr;
    const bool reused = conn != nullptr;
    if (!conn) {
      auto made = co_await connector_.connect(context, cert_id, deadline);
      if (!made) co_return std::move(made).error();
      conn = made.value();
    }
    conn->expires_at(deadline);
    HttpResponse out;
    error_code ec;
    bool got_some = false;        // any byte of the response arrived
    bool keep_alive = false;      // the response allows reusing the connection
    std::uint64_t delivered = 0;  // body bytes handed to the sink
    std::optional<Error> sink_error;
    http::response_parser<http::buffer_body> parser;
    parser.body_limit(max_response_bytes_);
    ec = co_await conn->with_stream([&](auto& s) {
      return write_read(s, conn->buffer, req, parser, sink ? *sink : kBuffered, what,
                        max_response_bytes_, out, delivered, sink_error);
    });
    got_some = parser.got_some();
    keep_alive = !ec && !sink_error && parser.is_done() && parser.get().keep_alive();
    if (sink_error) {
      // The sink refused the body (a decode error, a limit, an exception), or the body could
      // not be decoded: the rest of it is unread, so the connection cannot carry another
      // request.
      conn->close();
      co_return std::move(*sink_error);
    }
    if (ec) {
      conn->close();
      // Never once a body byte reached the sink: it has consumed part of this response.
      if (reused && !got_some && delivered == 0 && ec != beast::error::timeout) {
        // A kept-alive connection the server closed meanwhile: it restarted, or closed idle
        // connections; the others kept are as old, so they go too. The server may still have
        // processed the request before closing, so only a safe one is retried (once, on a new
        // connection); anything else could otherwise be applied twice.
        close_all();
        if (replayable(req.method())) continue;
        co_return Error::make(
            Errc::network, what + ": kept-alive connection closed by the server (" + ec.message() +
                               "); not retried: " + std::string(req.method_string()) +
                               " is not safe to replay");
      }
      if (ec == http::error::body_limit) {
        co_return Error::make(Errc::too_large, what +
                                                   ": response body exceeds max_response_bytes (" +
                                                   std::to_string(max_response_bytes_) + " bytes)");
      }
      co_return from_ec(ec, what);
    }
    if (keep_alive && idle_.size() < max_idle_) {
      conn->expires_never();
      conn->idle_since = clock_->now();
      idle_.push_back(std::move(conn));
    } else {
      conn->close();
    }
    co_return out;
  }
  co_return Error::make(Errc::network, what + ": connection closed by the server");
}

void ConnectionPool::close_all() {
  for (auto& c : idle_) c->close();
  idle_.clear();
}

}  // namespace kinformer::client::detail
