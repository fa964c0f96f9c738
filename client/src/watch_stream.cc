#include "watch_stream.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <memory>
#include <string_view>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>

#include "kinformer/client/api_error.h"
#include "kinformer/client/watch_decoder.h"
#include "protobuf/negotiation.h"

namespace kinformer::client::detail {
namespace {

using Phase = WatchState::Phase;

template <class Stream>
awaitable<error_code> write_header(Stream& stream, beast::flat_buffer& buffer,
                                   http::request<http::string_body>& req,
                                   http::response_parser<http::buffer_body>& parser) {
  auto [wec, wn] = co_await http::async_write(stream, req, kTuple);
  if (wec) co_return wec;
  auto [rec, rn] = co_await http::async_read_header(stream, buffer, parser, kTuple);
  co_return rec;
}

template <class Stream>
awaitable<error_code> read_some(Stream& stream, beast::flat_buffer& buffer,
                                http::response_parser<http::buffer_body>& parser) {
  auto [ec, n] = co_await http::async_read_some(stream, buffer, parser, kTuple);
  co_return ec;
}

// The read-idle deadline of a watch: the configured one, else timeoutSeconds + 60 s from the
// request's query, else 10 min.
std::chrono::milliseconds watch_idle_timeout(std::chrono::milliseconds configured,
                                             std::string_view target) {
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
      if (ec == std::errc() && ptr == v.data() + v.size() && secs > 0 &&
          secs < (std::int64_t{1} << 31)) {
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

std::string header_value(const HttpResponse& r, std::string_view name) {
  for (const auto& [k, v] : r.headers) {
    if (beast::iequals(k, name)) return v;
  }
  return {};
}

// Waking the reader. A read's events wake it at once, unless more bytes are already waiting (on
// the socket, or read and not yet parsed): then they are queued unsignalled and the reader is woken
// once for the burst, when a read leaves the socket empty, when kMaxUnsignalled events wait, before
// reading pauses, or at the latest kMaxSignalDelay after the first of them (the next read can block
// although bytes are waiting: the rest of a TLS record may be late). A reader that is awake takes
// queued events whether signalled or not. A server that flushes every event (kube-apiserver's
// initial events do) otherwise costs the reader one sleep and one wake-up per event.
constexpr std::size_t kMaxUnsignalled = 256;
// The bounds of a watch's read buffer (stream_body).
constexpr std::size_t kMinChunk = std::size_t{4} * 1024;
constexpr std::size_t kMaxChunk = std::size_t{64} * 1024;
constexpr auto kMaxSignalDelay = std::chrono::milliseconds(2);

// Io thread. Takes mu to hand a notify_when_ready() request its wake-up.
void signal_reader(WatchState& st) {
  if (st.unsignalled == 0) return;
  st.unsignalled = 0;
  std::unique_lock lock(st.mu);
  st.notify_reader(lock);
}

// Arms the bound on the deferred wake-up unless it is armed. Io thread.
void bound_signal_delay(const std::shared_ptr<WatchState>& st) {
  if (st->signal_armed) return;
  st->signal_armed = true;
  st->signal_timer->expires_after(kMaxSignalDelay);
  st->signal_timer->async_wait([self = st](error_code) {
    self->signal_armed = false;
    signal_reader(*self);
  });
}

// Arms the read-idle deadline of the body read in progress: when it passes, the read is
// cancelled and counted as idle. Re-arming replaces the previous deadline. Io thread.
void arm_idle(const std::shared_ptr<WatchState>& st, std::chrono::milliseconds timeout) {
  // At most a day: a larger value is "none" for a watch, and would overflow the timer.
  timeout = std::min<std::chrono::milliseconds>(timeout, std::chrono::hours(24));
  const std::uint64_t generation = ++st->idle_generation;
  st->idle_armed = timeout;
  st->idle_fired = false;
  if (st->conn) st->conn->uncancel();  // a cut of an earlier read that had already completed
  st->idle_timer->expires_after(timeout);
  st->idle_timer->async_wait([st, generation](error_code ec) {
    // A wait that had already expired when it was re-armed or cancelled still runs, with no
    // error: only the current arming of a read in progress may cut it.
    if (ec || generation != st->idle_generation || !st->reading || !st->conn) return;
    st->idle_fired = true;
    st->conn->cancel();
  });
}

// Reads the body of an open watch into `st` until it ends, fails or is cancelled.
template <class Stream>
awaitable<void> stream_body(std::shared_ptr<WatchState> st, Stream& stream,
                            http::response_parser<http::buffer_body>& parser,
                            std::shared_ptr<const Codec> codec, std::size_t max_event_bytes,
                            std::chrono::milliseconds idle_timeout) {
  Connection& conn = *st->conn;
  // JSON lines or protobuf frames, as the server chose (protobuf/negotiation.h).
  const auto content_type = parser.get()[http::field::content_type];
  pb::WatchBodyDecoder decoder(std::move(codec),
                               std::string_view(content_type.data(), content_type.size()),
                               max_event_bytes);
  // The read buffer doubles while reads fill it (a burst, e.g. a WatchList's initial events), up
  // to kMaxChunk, and drops back to kMinChunk after a read that found little and left nothing
  // waiting: a quiet watch holds the small one.
  std::size_t chunk_size = kMinChunk;
  auto chunk = std::make_unique_for_overwrite<char[]>(chunk_size);
  std::vector<WatchEvent> events;
  std::optional<Error> failure;
  // One chunk header or piece of body per read (as async_read_header left it): an eager parser
  // would go on to an incomplete next chunk header and wait for it, holding body bytes already
  // read, and their events, until more arrives.
  parser.eager(false);
  for (;;) {
    if (parser.is_done()) {
      if (auto s = decoder.finish(); !s) failure = s.error();
      break;
    }
    parser.get().body().data = chunk.get();
    parser.get().body().size = chunk_size;
    // Read-idle deadline, re-armed for every read (never while paused for flow control), at its
    // value now (set_idle_timeout() may have changed it).
    idle_timeout = std::chrono::milliseconds(st->idle_timeout_ms.load(std::memory_order_relaxed));
    st->reading = true;
    arm_idle(st, idle_timeout);
    error_code ec = co_await read_some(stream, conn.buffer, parser);
    st->reading = false;
    ++st->idle_generation;  // a wait of this read that still runs must not touch the next one
    st->idle_timer->cancel();
    // need_buffer: the parser stopped because `chunk` is full, with more of the body at hand.
    const bool chunk_full = ec == http::error::need_buffer;
    if (chunk_full) ec = {};
    std::size_t got = chunk_size - parser.get().body().size;
    Status fed = Ok{};
    std::uint64_t complete_before = decoder.complete_bytes();
    if (got > 0) fed = decoder.feed(std::string_view(chunk.get(), got), events);
    // The lines completed by this read, shared out among its events (the last takes the rest).
    auto batch_bytes = static_cast<std::size_t>(decoder.complete_bytes() - complete_before);
    st->unsignalled += events.size();
    // More to read at once: a full `chunk`, bytes in the socket or decrypted in the TLS layer,
    // or bytes read and not yet parsed. Beast keeps a chunk's closing CRLF in its buffer until the
    // next chunk header arrives, so those two bytes alone are not more to read. (The CRLF and part
    // of the next header count as more although the next read may wait for the rest:
    // kMaxSignalDelay bounds that.)
    error_code avail_ec;
    const bool more_waiting =
        st->unsignalled > 0 && (chunk_full || conn.buffer.size() > 2 || conn.tls_pending() > 0 ||
                                (conn.lowest().socket().available(avail_ec) > 0 && !avail_ec));
    bool cancelled;
    bool deferred;
    {
      std::lock_guard lock(st->mu);
      cancelled = st->phase == Phase::cancelled;
      for (std::size_t i = 0; i < events.size(); ++i) {
        std::size_t share = batch_bytes / events.size();
        if (i + 1 == events.size()) share = batch_bytes - share * i;
        st->events.push_back({std::move(events[i]), share});
        st->queued_bytes += share;
      }
      deferred =
          more_waiting && st->unsignalled < kMaxUnsignalled && !st->full() && !ec && !cancelled;
    }
    if (deferred) {
      bound_signal_delay(st);
    } else {
      signal_reader(*st);
    }
    events.clear();
    // The decoder copied what it keeps: the buffer may change size now.
    const std::size_t next_size = chunk_full                              ? chunk_size * 2
                                  : !more_waiting && got < chunk_size / 8 ? kMinChunk
                                                                          : chunk_size;
    if (next_size != chunk_size && next_size <= kMaxChunk) {
      chunk_size = next_size;
      chunk = std::make_unique_for_overwrite<char[]>(chunk_size);
    }
    if (cancelled) {
      failure = Error::make(Errc::cancelled, "watch cancelled");
      break;
    }
    if (!fed) {
      failure = fed.error();
      break;
    }
    // The timer may run in the same turn as a read that just got data: then nothing was cut.
    if ((st->idle_fired && ec) || ec == beast::error::timeout) {
      failure = Error::make(Errc::timeout, "watch idle for " + format_seconds(st->idle_armed) +
                                               ": no data from the server");
      break;
    }
    if (ec) {
      failure = Error::make(Errc::truncated, "watch stream cut short after " +
                                                 std::to_string(decoder.offset()) +
                                                 " bytes: " + ec.message());
      break;
    }
    // Flow control: stop reading while the reader is far behind. next() sets the phase back to
    // open and wakes the timer once it has caught up; a cancel wakes it too.
    for (;;) {
      {
        std::lock_guard lock(st->mu);
        if (st->phase == Phase::cancelled || !st->full()) break;
        st->phase = Phase::paused;
      }
      co_await st->pause_timer->async_wait(kTuple);
      st->pause_timer->expires_at(asio::steady_timer::time_point::max());
    }
  }
  conn.close();
  // The reader is woken below; a deferred wake-up is not needed any more.
  st->signal_timer->cancel();
  std::unique_lock lock(st->mu);
  if (st->phase != Phase::cancelled) {
    st->phase = failure ? Phase::failed : Phase::ended;
    st->error = std::move(failure);
  }
  st->notify_reader(lock);
}

}  // namespace

awaitable<void> run_watch(std::shared_ptr<WatchState> st, Connector& connector,
                          const TransportOptions& options, http::request<http::string_body> req,
                          std::shared_ptr<ssl::context> context, std::size_t cert_id,
                          std::chrono::steady_clock::time_point deadline,
                          std::shared_ptr<const Codec> codec,
                          std::chrono::milliseconds requested_idle_timeout) {
  auto fail_open = [&](Error e) {
    std::unique_lock lock(st->mu);
    st->phase = Phase::open_failed;
    st->error = std::move(e);
    st->notify_reader(lock);
  };
  st->idle_timer.emplace(co_await asio::this_coro::executor);
  st->pause_timer.emplace(co_await asio::this_coro::executor,
                          asio::steady_timer::time_point::max());
  st->signal_timer.emplace(co_await asio::this_coro::executor);
  auto made = co_await connector.connect(context, cert_id, deadline);
  if (!made) {
    fail_open(std::move(made).error());
    co_return;
  }
  st->conn = made.value();
  Connection& conn = *st->conn;
  conn.expires_at(deadline);
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  error_code ec =
      co_await conn.with_stream([&](auto& s) { return write_header(s, conn.buffer, req, parser); });
  if (ec) {
    conn.close();
    fail_open(from_ec(ec, "WATCH " + std::string(req.target())));
    co_return;
  }
  HttpResponse head;
  head.status = static_cast<int>(parser.get().result_int());
  head.headers = copy_headers(parser.get().base());
  if (head.status != 200) {
    // Read a bounded error body (Status JSON or plain text), then map it. The piece is on the
    // heap: an array here would sit in the coroutine's frame, which lives as long as the watch.
    std::string body;
    constexpr std::size_t kPiece = 8192;
    const auto buf = std::make_unique_for_overwrite<char[]>(kPiece);
    while (!parser.is_done() && body.size() < (1u << 20)) {
      parser.get().body().data = buf.get();
      parser.get().body().size = kPiece;
      error_code rec =
          co_await conn.with_stream([&](auto& s) { return read_some(s, conn.buffer, parser); });
      body.append(buf.get(), kPiece - parser.get().body().size);
      if (rec && rec != http::error::need_buffer) break;
    }
    conn.close();
    Error e = error_from_protobuf_response(head.status, body, header_value(head, "Retry-After"));
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
    st->phase = Phase::open;
    st->cv.notify_all();
  }
  conn.expires_never();
  auto idle_timeout = watch_idle_timeout(requested_idle_timeout > std::chrono::milliseconds::zero()
                                             ? requested_idle_timeout
                                             : options.watch_idle_timeout,
                                         req.target());
  // Unless the reader already changed it (set_idle_timeout() before the headers came).
  std::int64_t unset = 0;
  st->idle_timeout_ms.compare_exchange_strong(unset, idle_timeout.count());
  co_await conn.with_stream([&](auto& s) {
    return stream_body(st, s, parser, std::move(codec), options.max_watch_event_bytes,
                       idle_timeout);
  });
}

Result<std::optional<WatchEvent>> WatchStreamImpl::next() {
  std::unique_lock lock(state_->mu);
  state_->cv.wait(lock, [&] {
    return !state_->events.empty() ||
           (state_->phase != Phase::open && state_->phase != Phase::paused);
  });
  if (state_->phase == Phase::cancelled) return Error::make(Errc::cancelled, "watch cancelled");
  if (!state_->events.empty()) {
    WatchEvent event = std::move(state_->events.front().event);
    state_->queued_bytes -= state_->events.front().bytes;
    state_->events.pop_front();
    if (state_->phase == Phase::paused && state_->drained()) {
      state_->phase = Phase::open;
      asio::post(state_->ex, [st = state_] {
        if (st->pause_timer) st->pause_timer->cancel();
      });
    }
    return std::optional<WatchEvent>(std::move(event));
  }
  if (state_->error) return *state_->error;
  return std::optional<WatchEvent>();
}

void WatchStreamImpl::set_idle_timeout(std::chrono::milliseconds timeout) {
  if (timeout <= std::chrono::milliseconds::zero()) return;
  state_->idle_timeout_ms = timeout.count();
  // The read in progress was armed with the old deadline: re-arm it from now (on the io thread,
  // which owns the connection; not while paused for flow control, when nothing is read).
  asio::post(state_->ex, [st = state_, timeout] {
    if (st->reading && st->idle_timer) arm_idle(st, timeout);
  });
}

std::size_t WatchStreamImpl::buffered() const {
  std::lock_guard lock(state_->mu);
  return state_->phase == Phase::cancelled ? 0 : state_->events.size();
}

void WatchStreamImpl::cancel() {
  {
    std::unique_lock lock(state_->mu);
    if (state_->phase == Phase::cancelled) return;
    state_->phase = Phase::cancelled;
    state_->notify_reader(lock);
  }
  asio::post(state_->ex, [st = state_] { st->cancel_io(); });
}

bool WatchStreamImpl::notify_when_ready(std::function<void()> wake) {
  {
    std::lock_guard lock(state_->mu);
    if (!state_->ready()) {
      state_->waker = std::move(wake);
      return true;
    }
    state_->waker = nullptr;
  }
  wake();
  return true;
}

}  // namespace kinformer::client::detail
