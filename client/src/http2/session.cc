#include "http2/session.h"

#include <openssl/ssl.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>
#include <utility>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/write.hpp>

namespace kinformer::client::detail {
namespace {

// The size of the connection's read buffer: one TLS record.
constexpr std::size_t kReadSize = std::size_t{16} * 1024;
// The most that may wait to be sent: requests and control frames are small, so this is a server
// that has stopped reading.
constexpr std::size_t kMaxOutbox = std::size_t{1} << 20;

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// A response head from a decoded header block: :status (a three-digit number) and the regular
// fields in order; nullopt when it is malformed.
std::optional<HttpResponse> response_head(std::vector<HeaderField>& fields) {
  HttpResponse head;
  bool regular_seen = false;
  for (auto& f : fields) {
    const bool pseudo = !f.name.empty() && f.name.front() == ':';
    // A response's one pseudo-header, before the regular fields (RFC 9113 §8.3).
    if (pseudo && (f.name != ":status" || regular_seen || head.status != 0)) return std::nullopt;
    regular_seen = regular_seen || !pseudo;
    if (f.name == ":status") {
      int status = 0;
      const char* end = f.value.data() + f.value.size();
      auto [ptr, ec] = std::from_chars(f.value.data(), end, status);
      if (ec != std::errc() || ptr != end || f.value.size() != 3 || status < 100 || status > 599) {
        return std::nullopt;
      }
      head.status = status;
    } else {
      head.headers.emplace_back(std::move(f.name), std::move(f.value));
    }
  }
  if (head.status == 0) return std::nullopt;
  return head;
}

}  // namespace

std::vector<HeaderField> http2_request_fields(const http::request<http::string_body>& req) {
  std::vector<HeaderField> out;
  out.push_back({":method", std::string(req.method_string())});
  out.push_back({":scheme", "https"});
  out.push_back({":authority", std::string(req[http::field::host])});
  out.push_back({":path", std::string(req.target())});
  // Connection names further hop-by-hop fields; they go too.
  std::vector<std::string> hop = {"host",    "connection",        "keep-alive", "proxy-connection",
                                  "upgrade", "transfer-encoding", "te"};
  for (std::string_view v = req[http::field::connection]; !v.empty();) {
    const auto comma = v.find(',');
    std::string_view token = v.substr(0, comma);
    while (!token.empty() && (token.front() == ' ' || token.front() == '\t')) {
      token.remove_prefix(1);
    }
    while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) token.remove_suffix(1);
    if (!token.empty()) hop.push_back(lower(token));
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
  for (const auto& f : req) {
    std::string name = lower(std::string_view(f.name_string().data(), f.name_string().size()));
    if (std::find(hop.begin(), hop.end(), name) != hop.end()) continue;
    out.push_back({std::move(name), std::string(f.value())});
  }
  return out;
}

// --- Http2Session ----------------------------------------------------------------------------

Http2Session::Http2Session(ConnectionPtr conn, Http2SessionOptions options,
                           std::shared_ptr<void> token)
    : conn_(std::move(conn)),
      options_(std::move(options)),
      token_(std::move(token)),
      timer_(conn_->lowest().get_executor()),
      last_read_(std::chrono::steady_clock::now()),
      idle_since_(last_read_) {}

// NOLINTNEXTLINE(bugprone-exception-escape): only bad_alloc can escape: terminate
Http2Session::~Http2Session() {
  if (!closed_) conn_->close();
}

awaitable<Status> Http2Session::start(std::chrono::steady_clock::time_point deadline) {
  auto self = shared_from_this();
  std::string out;
  ClientSettings settings;
  settings.initial_window_size = options_.stream_window;
  append_client_preface(out, settings);
  if (options_.connection_window > kDefaultInitialWindowSize) {
    append_window_update(out, 0, options_.connection_window - kDefaultInitialWindowSize);
    connection_window_ = options_.connection_window;
  }
  send(out);
  conn_->expires_never();
  asio::co_spawn(conn_->lowest().get_executor(), read_loop(self), asio::detached);
  ready_timer_.emplace(conn_->lowest().get_executor(), deadline);
  if (!settings_received_ && !closed_) {
    co_await ready_timer_->async_wait(kTuple);
  }
  ready_timer_.reset();
  if (closed_) {
    co_return failure_ ? *failure_
                       : Error::make(Errc::network, "HTTP/2 connection to " + options_.server +
                                                        " closed before its SETTINGS");
  }
  if (!settings_received_) {
    Error e = Error::make(Errc::timeout, "HTTP/2 connection to " + options_.server +
                                             ": no SETTINGS from the server within the deadline");
    close(e);
    co_return e;
  }
  arm_timer();
  co_return Ok{};
}

bool Http2Session::can_open() const {
  if (closed_ || going_away_ || suspected_ || !settings_received_ || next_id_ > kMaxStreamId) {
    return false;
  }
  return !peer_.max_concurrent_streams || streams_.size() < *peer_.max_concurrent_streams;
}

std::uint32_t Http2Session::open(const std::vector<HeaderField>& fields,
                                 std::shared_ptr<Http2StreamHandler> handler) {
  const std::uint32_t id = next_id_;
  next_id_ += 2;
  std::optional<std::uint32_t> update;
  if (table_update_due_) {
    update = 0;
    table_update_due_ = false;
  }
  std::string out;
  append_headers(out, id, hpack_encode_request(fields, update), /*end_stream=*/true,
                 peer_.max_frame_size);
  Stream& s = streams_[id];
  s.handler = std::move(handler);
  s.window = options_.stream_window;
  send(out);
  return id;
}

void Http2Session::hold(std::uint32_t id) {
  if (auto it = streams_.find(id); it != streams_.end()) it->second.held = true;
}

void Http2Session::release(std::uint32_t id) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  it->second.held = false;
  if (it->second.pending > 0) {
    std::string out;
    append_window_update(out, id, it->second.pending);
    it->second.window += it->second.pending;
    it->second.pending = 0;
    send(out);
  }
}

void Http2Session::reset(std::uint32_t id) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  streams_.erase(it);
  if (streams_.empty()) idle_since_ = std::chrono::steady_clock::now();
  if (closed_) return;
  std::string out;
  append_rst_stream(out, id, ErrorCode::cancel);
  send(out);
  // Going away and nothing left: done.
  if (going_away_ && streams_.empty()) {
    close(Error::make(Errc::network, "HTTP/2 connection to " + options_.server + " went away"));
  }
}

void Http2Session::suspect() {
  if (closed_ || suspected_) return;
  suspected_ = true;
  if (!ping_outstanding_) send_ping();
  arm_timer();  // replaces the wait armed before, which ends with operation_aborted
}

void Http2Session::send_ping() {
  std::string out;
  append_ping(out, PingData{'k', 'i', 'n', 'f', 'o', 'r', 'm', 'r'}, false);
  send(out);
  ping_outstanding_ = true;
  ping_sent_ = std::chrono::steady_clock::now();
}

void Http2Session::close(const Error& why) {
  if (closed_) return;
  closed_ = true;
  failure_ = why;
  // A write in progress (a GOAWAY among it) may finish, for at most a second; the writer then
  // closes the connection, which ends the read. One still stuck then is cut off.
  if (write_running_) {
    timer_.expires_after(std::chrono::seconds(1));
    timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (!ec && self->write_running_) self->conn_->close();
    });
  } else {
    conn_->close();
    timer_.cancel();
  }
  if (ready_timer_) ready_timer_->cancel();
  // Handlers may call back (reset): take them out first.
  auto streams = std::move(streams_);
  streams_.clear();
  for (auto& [id, s] : streams) s.handler->on_end(why, false);
}

void Http2Session::send(const std::string& frames) {
  if (closed_ || frames.empty()) return;
  // A server that does not read what we send while it goes on sending (PINGs and SETTINGS to
  // acknowledge, streams to reset) would grow the queue without bound.
  const std::size_t waiting = writing_.size() + outbox_.size();
  if (waiting + frames.size() > kMaxOutbox) {
    close(Error::make(Errc::network, "HTTP/2 connection to " + options_.server + ": " +
                                         std::to_string(waiting) +
                                         " bytes wait to be sent: the server does not read"));
    return;
  }
  outbox_ += frames;
  if (write_running_) return;
  write_running_ = true;
  asio::co_spawn(conn_->lowest().get_executor(), write_loop(shared_from_this()), asio::detached);
}

// `self` keeps the session alive while the loop runs.
awaitable<void> Http2Session::write_loop(std::shared_ptr<Http2Session> self) {
  (void)self;
  try {
    while (!outbox_.empty()) {
      writing_.swap(outbox_);
      outbox_.clear();
      write_started_ = std::chrono::steady_clock::now();
      auto [ec, n] = co_await conn_->with_stream(
          [&](auto& s) { return asio::async_write(s, asio::buffer(writing_), kTuple); });
      writing_.clear();
      if (ec) {
        close(from_ec(ec, "HTTP/2 connection to " + options_.server + ": write"));
        break;
      }
    }
  } catch (const std::exception& e) {
    close(Error::make(Errc::network,
                      "HTTP/2 connection to " + options_.server + ": internal error: " + e.what()));
  }
  if (closed_) {
    conn_->close();
    timer_.cancel();  // close()'s bound on this write
  }
  // Keep the memory of a large write (many requests at once) no longer than it is needed; both
  // buffers, which swap.
  if (writing_.capacity() > 4096) std::string().swap(writing_);
  if (outbox_.capacity() > 4096) std::string().swap(outbox_);
  write_running_ = false;
}

awaitable<void> Http2Session::read_loop(std::shared_ptr<Http2Session> self) {
  (void)self;
  try {
    co_await read_frames();
  } catch (const std::exception& e) {
    // A stream's owner threw (bad_alloc): the connection's state is not known to be whole any
    // more, so it ends, and every stream on it fails rather than stalls.
    close(Error::make(Errc::network,
                      "HTTP/2 connection to " + options_.server + ": internal error: " + e.what()));
  }
}

awaitable<void> Http2Session::read_frames() {
  // One for the connection, whatever the number of streams.
  const auto buffer = std::make_unique_for_overwrite<char[]>(kReadSize);
  while (!closed_) {
    auto [ec, n] = co_await conn_->with_stream(
        [&](auto& s) { return s.async_read_some(asio::buffer(buffer.get(), kReadSize), kTuple); });
    if (closed_) break;
    if (ec) {
      close(from_ec(ec, "HTTP/2 connection to " + options_.server));
      break;
    }
    last_read_ = std::chrono::steady_clock::now();
    ping_outstanding_ = false;
    suspected_ = false;
    std::string_view in(buffer.get(), n);
    for (;;) {
      auto frame = reader_.read(in);
      if (!frame) {
        fail(frame.error());
        break;
      }
      if (!*frame) break;
      if (auto s = on_frame(**frame); !s) {
        fail(s.error());
        break;
      }
      if (closed_) break;
    }
    if (closed_) break;
    // Each stream that got data hears that this read is done (it wakes its reader once). The
    // list, not a walk of every stream: a connection may carry hundreds.
    std::vector<std::uint32_t> touched;
    touched.swap(touched_);
    for (const std::uint32_t id : touched) {
      auto it = streams_.find(id);
      if (it == streams_.end()) continue;  // ended or reset meanwhile
      it->second.touched = false;
      auto handler = it->second.handler;
      handler->on_read_done();  // may end or reset streams
    }
    touched.clear();
    if (touched_.empty()) touched_.swap(touched);  // keep the capacity
    flush();
  }
}

void Http2Session::flush() {
  // Window given back to the connection in one frame per read, once half of it is used.
  if (connection_pending_ >= options_.connection_window / 2 && !closed_) {
    std::string out;
    append_window_update(out, 0, connection_pending_);
    connection_window_ += connection_pending_;
    connection_pending_ = 0;
    send(out);
  }
}

void Http2Session::fail(const Http2Error& error) {
  if (closed_) return;
  // A stream this client never opened is idle: no RST_STREAM may name it (§6.4), so its error is
  // the connection's.
  const bool idle_stream = error.stream_id % 2 == 0 || error.stream_id >= next_id_;
  if (error.scope == ErrorScope::stream && idle_stream) {
    fail(Http2Error::connection(error.code, error.message));
    return;
  }
  if (error.scope == ErrorScope::stream) {
    std::string out;
    append_rst_stream(out, error.stream_id, error.code);
    send(out);
    end_stream(error.stream_id, error.to_error(), false);
    return;
  }
  // GOAWAY says why (RFC 9113 §5.4.1); close() lets the write finish, briefly.
  std::string out;
  append_goaway(out, 0, error.code, "");
  send(out);
  close(error.to_error());
}

Http2Status Http2Session::on_frame(const Frame& frame) {
  if (auto s = assembler_.check_sequence(frame.header); !s) return s;
  auto decoded = decode_frame(frame);
  if (!decoded) {
    if (decoded.error().scope == ErrorScope::connection) return std::move(decoded).error();
    fail(decoded.error());
    return Ok{};
  }
  auto block = assembler_.on_frame(*decoded);
  if (!block) return std::move(block).error();
  if (*block) return on_header_block(**block);
  return std::visit(
      [&](auto& f) -> Http2Status {
        using T = std::decay_t<decltype(f)>;
        if constexpr (std::is_same_v<T, DataFrame>) {
          return on_data(f);
        } else if constexpr (std::is_same_v<T, SettingsFrame>) {
          on_settings(f);
        } else if constexpr (std::is_same_v<T, PingFrame>) {
          if (!f.ack) {
            std::string out;
            append_ping(out, f.opaque, true);
            send(out);
          }
        } else if constexpr (std::is_same_v<T, GoawayFrame>) {
          on_goaway(f);
        } else if constexpr (std::is_same_v<T, RstStreamFrame>) {
          if (f.stream_id % 2 == 0 || f.stream_id >= next_id_) {
            return Http2Error::connection(
                ErrorCode::protocol_error,
                "RST_STREAM frame on stream " + std::to_string(f.stream_id) + ", never opened");
          }
          end_stream(f.stream_id,
                     Error::make(Errc::network, "HTTP/2 stream reset by the server: " +
                                                    error_code_name(f.error_code)),
                     f.error_code == ErrorCode::refused_stream);
        } else if constexpr (std::is_same_v<T, WindowUpdateFrame>) {
          // We send no DATA: only whether its stream may be named is ours to check (§5.1).
          if (f.stream_id != 0 && (f.stream_id % 2 == 0 || f.stream_id >= next_id_)) {
            return Http2Error::connection(
                ErrorCode::protocol_error,
                "WINDOW_UPDATE frame on stream " + std::to_string(f.stream_id) + ", never opened");
          }
        }
        // HEADERS and CONTINUATION: in a block; the rest: nothing to do.
        return Ok{};
      },
      *decoded);
}

Http2Status Http2Session::on_header_block(const HeaderBlock& block) {
  // Decoded whatever the stream, to keep the table in step with the server's.
  auto fields = decoder_.decode(block.block);
  if (!fields) {
    return Http2Error::connection(ErrorCode::compression_error, fields.error().message);
  }
  if (block.stream_id % 2 == 0 || block.stream_id >= next_id_) {
    return Http2Error::connection(ErrorCode::protocol_error,
                                  "HEADERS on stream " + std::to_string(block.stream_id) +
                                      ", which this client never opened");
  }
  auto it = streams_.find(block.stream_id);
  if (it == streams_.end()) return Ok{};  // reset or ended: the rest of it is dropped
  if (it->second.got_head) {
    // Trailers: nothing in them is ours to use. They must end the stream (RFC 9113 §8.1).
    if (!block.end_stream) {
      fail(Http2Error::stream(ErrorCode::protocol_error, block.stream_id,
                              "trailers without END_STREAM"));
      return Ok{};
    }
    end_stream(block.stream_id, std::nullopt, false);
    return Ok{};
  }
  auto head = response_head(*fields);
  if (!head) {
    fail(Http2Error::stream(ErrorCode::protocol_error, block.stream_id,
                            "response headers without a valid :status"));
    return Ok{};
  }
  if (head->status >= 100 && head->status < 200) {
    if (block.end_stream || head->status == 101) {
      fail(Http2Error::stream(ErrorCode::protocol_error, block.stream_id,
                              "informational response " + std::to_string(head->status) +
                                  (head->status == 101 ? "" : " that ends the stream")));
    }
    return Ok{};
  }
  it->second.got_head = true;
  auto handler = it->second.handler;
  handler->on_head(std::move(*head));
  if (block.end_stream) end_stream(block.stream_id, std::nullopt, false);
  return Ok{};
}

Http2Status Http2Session::on_data(const DataFrame& data) {
  const std::uint32_t size = data.flow_controlled_size;
  if (size > connection_window_) {
    return Http2Error::connection(ErrorCode::flow_control_error,
                                  "DATA frame on stream " + std::to_string(data.stream_id) +
                                      " of " + std::to_string(size) +
                                      " bytes, past the connection's window");
  }
  connection_window_ -= size;
  connection_pending_ += size;
  if (data.stream_id % 2 == 0 || data.stream_id >= next_id_) {
    return Http2Error::connection(ErrorCode::protocol_error,
                                  "DATA frame on stream " + std::to_string(data.stream_id) +
                                      ", which this client never opened");
  }
  auto it = streams_.find(data.stream_id);
  if (it == streams_.end()) return Ok{};  // reset or ended: dropped, the connection's window back
  Stream& s = it->second;
  if (size > s.window) {
    fail(Http2Error::stream(
        ErrorCode::flow_control_error, data.stream_id,
        "DATA frame of " + std::to_string(size) + " bytes, past the stream's window"));
    return Ok{};
  }
  if (!s.got_head) {
    fail(Http2Error::stream(ErrorCode::protocol_error, data.stream_id,
                            "DATA frame before the response headers"));
    return Ok{};
  }
  s.window -= size;
  s.pending += size;
  if (!s.touched) {
    s.touched = true;
    touched_.push_back(data.stream_id);
  }
  auto handler = s.handler;
  if (!data.data.empty()) handler->on_data(data.data);
  // The handler may have reset the stream, or held it.
  it = streams_.find(data.stream_id);
  if (it == streams_.end()) return Ok{};
  if (data.end_stream) {
    end_stream(data.stream_id, std::nullopt, false);
    return Ok{};
  }
  give_back(data.stream_id, it->second);
  return Ok{};
}

void Http2Session::give_back(std::uint32_t id, Stream& s) {
  // Half the window at a time: few frames, and the server never waits for one.
  if (s.held || s.pending < options_.stream_window / 2 || closed_) return;
  std::string out;
  append_window_update(out, id, s.pending);
  s.window += s.pending;
  s.pending = 0;
  send(out);
}

void Http2Session::on_settings(const SettingsFrame& settings) {
  if (settings.ack) return;
  const std::uint32_t table = peer_.header_table_size;
  peer_.apply(settings);
  // Our encoder keeps no table: a smaller one the server wants is said with a size update.
  if (peer_.header_table_size < table && peer_.header_table_size < kDefaultHeaderTableSize) {
    table_update_due_ = true;
  }
  std::string out;
  append_settings_ack(out);
  send(out);
  if (!settings_received_) {
    settings_received_ = true;
    if (ready_timer_) ready_timer_->cancel();
  }
}

void Http2Session::on_goaway(const GoawayFrame& goaway) {
  going_away_ = true;
  // Streams above the last one the server processed were not processed: safe to send again.
  std::vector<std::uint32_t> refused;
  for (auto& [id, s] : streams_) {
    if (id > goaway.last_stream_id) refused.push_back(id);
  }
  for (auto id : refused) {
    end_stream(id,
               Error::make(Errc::network, "HTTP/2 server " + options_.server + " going away (" +
                                              error_code_name(goaway.error_code) +
                                              "); the request was not processed"),
               true);
  }
  if (streams_.empty()) {
    close(Error::make(Errc::network, "HTTP/2 connection to " + options_.server + " went away"));
  }
}

void Http2Session::end_stream(std::uint32_t id, std::optional<Error> error, bool unprocessed) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  auto handler = std::move(it->second.handler);
  streams_.erase(it);
  if (streams_.empty()) idle_since_ = std::chrono::steady_clock::now();
  handler->on_end(std::move(error), unprocessed);
  if (going_away_ && streams_.empty()) {
    close(Error::make(Errc::network, "HTTP/2 connection to " + options_.server + " went away"));
  }
}

void Http2Session::arm_timer() {
  if (closed_) return;
  const auto now = std::chrono::steady_clock::now();
  auto at =
      ping_outstanding_ ? ping_sent_ + options_.ping_timeout : last_read_ + options_.ping_after;
  if (streams_.empty()) at = std::min(at, idle_since_ + options_.idle_timeout);
  timer_.expires_at(std::max(at, now));
  timer_.async_wait([self = shared_from_this()](error_code ec) {
    if (!ec) self->on_timer();
  });
}

void Http2Session::on_timer() {
  if (closed_) return;
  const auto now = std::chrono::steady_clock::now();
  if (streams_.empty() && now - idle_since_ >= options_.idle_timeout) {
    close(Error::make(Errc::network, "HTTP/2 connection to " + options_.server + " idle"));
    return;
  }
  if (write_running_ && now - write_started_ >= options_.ping_timeout) {
    // Reads may go on while our writes are stuck (the server reads nothing): not alive.
    close(Error::make(Errc::timeout, "HTTP/2 connection to " + options_.server +
                                         ": a write did not finish within " +
                                         std::to_string(options_.ping_timeout.count()) + " ms"));
    return;
  }
  if (ping_outstanding_ && now - ping_sent_ >= options_.ping_timeout) {
    close(Error::make(Errc::timeout, "HTTP/2 connection to " + options_.server +
                                         ": no answer to a PING within " +
                                         std::to_string(options_.ping_timeout.count()) + " ms"));
    return;
  }
  if (!ping_outstanding_ && now - last_read_ >= options_.ping_after) send_ping();
  arm_timer();
}

// --- Http2Pool -------------------------------------------------------------------------------

Http2Pool::Entry& Http2Pool::entry(const std::shared_ptr<ssl::context>& context,
                                   std::size_t cert_id) {
  // Entries of contexts no longer used (a rotated client certificate) go once empty.
  std::erase_if(entries_, [&](Entry& e) {
    std::erase_if(e.sessions, [](const auto& s) { return s->closed(); });
    return e.context != context && e.sessions.empty() && !e.connecting;
  });
  for (auto& e : entries_) {
    if (e.context == context && e.cert_id == cert_id) return e;
  }
  entries_.push_back({context, cert_id, {}, nullptr, false});
  return entries_.back();
}

awaitable<Result<Http2Pool::Lease>> Http2Pool::acquire(
    std::shared_ptr<ssl::context> context, std::size_t cert_id,
    std::chrono::steady_clock::time_point deadline) {
  // Marks a connection being made while it lives, so that watches that come meanwhile wait for
  // it; the mark goes however its maker ends (returns, throws, or its coroutine is destroyed).
  struct Mark {
    Http2Pool& pool;
    const std::shared_ptr<ssl::context>& context;
    std::size_t cert_id;
    std::shared_ptr<asio::steady_timer> timer;
    // NOLINTNEXTLINE(bugprone-exception-escape): only bad_alloc can escape: terminate
    ~Mark() {
      for (auto& e : pool.entries_) {
        if (e.context == context && e.cert_id == cert_id && e.connecting == timer) {
          e.connecting = nullptr;
        }
      }
      timer->cancel();
    }
  };
  auto ex = co_await asio::this_coro::executor;
  for (;;) {
    Entry& e = entry(context, cert_id);
    for (auto& s : e.sessions) {
      if (s->can_open()) co_return Lease{s, nullptr};
    }
    const auto now = std::chrono::steady_clock::now();
    if (e.connecting && !e.http1_only && e.connecting->expiry() > now) {
      // Another watch is connecting: its session will likely take this stream too.
      auto wait = e.connecting;
      co_await wait->async_wait(kTuple);
      if (std::chrono::steady_clock::now() >= deadline) {
        co_return Error::make(Errc::timeout, "HTTP/2 connection to " + options_.server +
                                                 ": not made within the request deadline");
      }
      continue;
    }
    const bool offer_h2 = !e.http1_only;
    // Watches that come meanwhile wait for this one's connection (and its SETTINGS).
    Mark mark{*this, context, cert_id, std::make_shared<asio::steady_timer>(ex, deadline)};
    if (offer_h2) e.connecting = mark.timer;
    auto made = co_await connector_.connect(context, cert_id, deadline, offer_h2);
    if (!made) co_return std::move(made).error();
    ConnectionPtr conn = made.value();
    if (!conn->http2) {
      entry(context, cert_id).http1_only = true;  // entries_ may have changed meanwhile
      co_return Lease{nullptr, conn};
    }
    auto session = std::make_shared<Http2Session>(conn, options_, make_token_());
    entry(context, cert_id).sessions.push_back(session);
    auto started = co_await session->start(deadline);
    if (!started) co_return std::move(started).error();
    if (session->can_open()) co_return Lease{session, nullptr};
    // A new connection that takes no stream (SETTINGS_MAX_CONCURRENT_STREAMS 0, or gone at
    // once): another would do the same; the watch fails and its reflector backs off.
    Error none = Error::make(Errc::network, "HTTP/2 connection to " + options_.server +
                                                ": the server takes no stream on a new connection");
    session->close(none);
    co_return none;
  }
}

void Http2Pool::close_all(const Error& why) {
  auto entries = std::move(entries_);
  entries_.clear();
  for (auto& e : entries) {
    for (auto& s : e.sessions) s->close(why);
    if (e.connecting) e.connecting->cancel();
  }
}

std::size_t Http2Pool::sessions() const {
  std::size_t n = 0;
  for (const auto& e : entries_) {
    for (const auto& s : e.sessions) n += s->closed() ? 0 : 1;
  }
  return n;
}

}  // namespace kinformer::client::detail
