#include "watch_stream.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <memory>
#include <string_view>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>

#include "http2/session.h"
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

// The watch could not be opened: the reader, waiting in Transport::watch, gets `e`.
void fail_watch_open(WatchState& st, Error e) {
  std::unique_lock lock(st.mu);
  st.phase = Phase::open_failed;
  st.error = std::move(e);
  st.notify_reader(lock);
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

// --- a watch on an HTTP/2 stream -------------------------------------------------------------

// A watch on a stream of a shared HTTP/2 connection: the session hands it the response head and
// DATA as they come, and it decodes the events into its WatchState as run_watch's HTTP/1.1 reader
// does. The stream's window stands in for the socket: held while the reader is far behind
// (WatchState::full), given back once it has caught up. The read-idle deadline counts from the
// last DATA (not while held: a server that waits for window is not silent). Io thread only.
class Http2Watch final : public Http2StreamHandler,
                         public WatchStreamIo,
                         public std::enable_shared_from_this<Http2Watch> {
 public:
  // What the stream has come to, as run_watch_h2 reads it once the head wait is over.
  enum class Stage { waiting, error_body, open, ended };

  Http2Watch(std::shared_ptr<WatchState> st, std::shared_ptr<Http2Session> session,
             std::shared_ptr<const Codec> codec, std::size_t max_event_bytes,
             std::chrono::steady_clock::time_point deadline)
      : st_(std::move(st)),
        session_(std::move(session)),
        codec_(std::move(codec)),
        max_event_bytes_(max_event_bytes),
        head_wait_(st_->ex, deadline) {}

  void start(const std::vector<HeaderField>& fields) {
    id_ = session_->open(fields, shared_from_this());
  }
  // Until the head of a 200 response, or the stream's end, or the deadline.
  asio::steady_timer& head_wait() { return head_wait_; }
  [[nodiscard]] Stage stage() const { return stage_; }
  // The head of a 200 response came: the watch is open (or already over) and reports to its
  // WatchState itself.
  [[nodiscard]] bool opened() const { return opened_; }
  [[nodiscard]] bool unprocessed() const { return unprocessed_; }
  [[nodiscard]] const std::optional<Error>& end_error() const { return end_error_; }
  HttpResponse& head() { return head_; }
  [[nodiscard]] const std::string& error_body() const { return error_body_; }

  // The connection may be dead: the session checks.
  void suspect() {
    if (session_) session_->suspect();
  }
  // Gives the stream up (the open failed: a deadline, an error response read).
  void abandon() {
    if (session_) session_->reset(id_);
    session_.reset();
    stage_ = Stage::ended;
  }

  void on_head(HttpResponse head) override {
    if (head.status != 200) {
      head_ = std::move(head);
      stage_ = Stage::error_body;
      return;
    }
    decoder_.emplace(codec_, header_value(head, "Content-Type"), max_event_bytes_);
    {
      std::lock_guard lock(st_->mu);
      st_->head = std::move(head);
      st_->phase = WatchState::Phase::open;
      st_->cv.notify_all();
    }
    stage_ = Stage::open;
    opened_ = true;
    st_->h2 = weak_from_this();
    last_data_ = std::chrono::steady_clock::now();
    arm_idle();
    head_wait_.cancel();
  }

  void on_data(std::string_view data) override {
    if (stage_ == Stage::error_body) {
      constexpr std::size_t kMaxErrorBody = std::size_t{1} << 20;
      error_body_.append(
          data.substr(0, kMaxErrorBody - std::min(kMaxErrorBody, error_body_.size())));
      // Enough of it: the server gets no more window for the rest.
      if (error_body_.size() >= kMaxErrorBody && session_) session_->hold(id_);
      return;
    }
    if (stage_ != Stage::open) return;
    last_data_ = std::chrono::steady_clock::now();
    const std::uint64_t complete_before = decoder_->complete_bytes();
    Status fed = Ok{};
    try {
      fed = decoder_->feed(data, events_);
    } catch (const std::exception& e) {
      // A codec's bug, or bad_alloc: this watch fails, not the connection's others.
      events_.clear();
      fed = Error::make(Errc::decode, std::string("decoding the watch stream threw: ") + e.what());
    }
    auto batch_bytes = static_cast<std::size_t>(decoder_->complete_bytes() - complete_before);
    st_->unsignalled += events_.size();
    bool full = false;
    {
      std::lock_guard lock(st_->mu);
      if (st_->phase != WatchState::Phase::cancelled) {
        for (std::size_t i = 0; i < events_.size(); ++i) {
          std::size_t share = batch_bytes / events_.size();
          if (i + 1 == events_.size()) share = batch_bytes - share * i;
          st_->events.push_back({std::move(events_[i]), share});
          st_->queued_bytes += share;
        }
        // Held whenever full: next() may have drained and reopened the queue since the last
        // hold, and its resume() is still on its way.
        if (st_->full()) {
          st_->phase = WatchState::Phase::paused;
          full = true;
        }
      }
    }
    events_.clear();
    if (!fed) {
      abandon_with(fed.error());
      return;
    }
    if (full) {
      session_->hold(id_);
      signal_reader(*st_);
    } else if (st_->unsignalled >= kMaxUnsignalled) {
      signal_reader(*st_);
    }
  }

  void on_read_done() override {
    if (stage_ == Stage::open) signal_reader(*st_);
  }

  void on_end(std::optional<Error> error, bool unprocessed) override {
    session_.reset();
    if (stage_ != Stage::open) {
      end_error_ = std::move(error);
      unprocessed_ = unprocessed;
      if (stage_ == Stage::waiting && !end_error_) {
        end_error_ = Error::make(Errc::network, "the server ended the stream without a response");
      }
      if (stage_ != Stage::error_body) stage_ = Stage::ended;
      head_wait_.cancel();
      return;
    }
    std::optional<Error> failure = std::move(error);
    if (failure) {
      // The connection's failure, or the stream's reset: the stream was cut short.
      failure = Error::make(failure->code == Errc::timeout ? Errc::timeout : Errc::truncated,
                            "watch stream cut short after " + std::to_string(decoder_->offset()) +
                                " bytes: " + failure->message);
    } else if (auto s = decoder_->finish(); !s) {
      failure = s.error();
    }
    finish(std::move(failure));
  }

  void resume() override {
    if (stage_ != Stage::open || !session_) return;
    {
      // Data that came after next() drained the queue may have filled it again: still held.
      std::lock_guard lock(st_->mu);
      if (st_->phase == WatchState::Phase::paused) return;
    }
    last_data_ = std::chrono::steady_clock::now();
    session_->release(id_);
  }

  // Reached through WatchState::h2, which is set once the watch is open.
  void cancel() override {
    if (stage_ == Stage::open) abandon_with(Error::make(Errc::cancelled, "watch cancelled"));
  }

  void rearm_idle() override {
    if (stage_ == Stage::open) arm_idle();
  }

 private:
  // Resets the stream and ends the watch with `failure`.
  void abandon_with(Error failure) {
    if (session_) session_->reset(id_);
    session_.reset();
    finish(std::move(failure));
  }

  void finish(std::optional<Error> failure) {
    stage_ = Stage::ended;
    session_.reset();
    ++st_->idle_generation;
    st_->idle_timer->cancel();
    st_->signal_timer->cancel();
    st_->unsignalled = 0;
    std::unique_lock lock(st_->mu);
    if (st_->phase != WatchState::Phase::cancelled) {
      st_->phase = failure ? WatchState::Phase::failed : WatchState::Phase::ended;
      st_->error = std::move(failure);
    }
    st_->notify_reader(lock);
  }

  // The read-idle deadline from the last DATA, at its value now (set_idle_timeout() may change
  // it). A wait that finds data came meanwhile, or the stream held, waits again.
  void arm_idle() {
    auto timeout = std::chrono::milliseconds(st_->idle_timeout_ms.load(std::memory_order_relaxed));
    timeout = std::min<std::chrono::milliseconds>(timeout, std::chrono::hours(24));
    st_->idle_armed = timeout;
    const std::uint64_t generation = ++st_->idle_generation;
    st_->idle_timer->expires_at(last_data_ + timeout);
    st_->idle_timer->async_wait([self = shared_from_this(), generation](error_code ec) {
      if (ec || generation != self->st_->idle_generation || self->stage_ != Stage::open) return;
      bool held;
      {
        std::lock_guard lock(self->st_->mu);
        held = self->st_->phase == WatchState::Phase::paused;
      }
      const auto now = std::chrono::steady_clock::now();
      if (held) self->last_data_ = now;
      if (held || now - self->last_data_ < self->st_->idle_armed) {
        self->arm_idle();
        return;
      }
      if (self->session_) self->session_->suspect();
      self->abandon_with(Error::make(
          Errc::timeout,
          "watch idle for " + format_seconds(self->st_->idle_armed) + ": no data from the server"));
    });
  }

  std::shared_ptr<WatchState> st_;
  std::shared_ptr<Http2Session> session_;  // null once the stream is over
  std::shared_ptr<const Codec> codec_;
  std::size_t max_event_bytes_;
  asio::steady_timer head_wait_;
  std::uint32_t id_ = 0;
  Stage stage_ = Stage::waiting;
  bool opened_ = false;
  bool unprocessed_ = false;
  std::optional<Error> end_error_;
  HttpResponse head_;  // an error response's
  std::string error_body_;
  std::optional<pb::WatchBodyDecoder> decoder_;
  std::vector<WatchEvent> events_;
  std::chrono::steady_clock::time_point last_data_;
};

// Opens the watch on a stream of `session` and waits for its response head. Returns true when
// it may be sent again (see run_watch) and `may_retry`: the caller sends it again.
awaitable<bool> run_watch_h2(std::shared_ptr<WatchState> st, std::shared_ptr<Http2Session> session,
                             const TransportOptions& options, const std::string& target,
                             std::vector<HeaderField> fields,
                             std::chrono::steady_clock::time_point deadline,
                             std::shared_ptr<const Codec> codec,
                             std::chrono::milliseconds idle_timeout, bool may_retry) {
  // Unless the reader already changed it (set_idle_timeout() before the headers came).
  std::int64_t unset = 0;
  st->idle_timeout_ms.compare_exchange_strong(unset, idle_timeout.count());
  auto watch = std::make_shared<Http2Watch>(st, std::move(session), std::move(codec),
                                            options.max_watch_event_bytes, deadline);
  watch->start(fields);
  co_await watch->head_wait().async_wait(kTuple);
  if (watch->opened()) co_return false;  // open, or already over: it said so itself
  switch (watch->stage()) {
    case Http2Watch::Stage::open:  // opened() above
    case Http2Watch::Stage::waiting:
      watch->suspect();
      watch->abandon();
      fail_watch_open(*st,
                      Error::make(Errc::timeout,
                                  "WATCH " + target + ": no response within the request deadline"));
      co_return false;
    case Http2Watch::Stage::error_body: {
      watch->abandon();
      HttpResponse& head = watch->head();
      Error e = error_from_protobuf_response(head.status, watch->error_body(),
                                             header_value(head, "Retry-After"));
      {
        std::lock_guard lock(st->mu);
        st->head = std::move(head);
      }
      fail_watch_open(*st, std::move(e));
      co_return false;
    }
    case Http2Watch::Stage::ended:
      break;
  }
  // Not processed, or cut off before any answer by the network or the server (a shared
  // connection the server had closed, as a kept-alive one may be): a watch is a GET, safe to
  // send once more. Not a deadline, a cancel, or a response that broke the protocol.
  const auto& why = watch->end_error();
  const bool retryable =
      watch->unprocessed() || (why && (why->code == Errc::network || why->code == Errc::truncated ||
                                       why->code == Errc::tls));
  if (retryable && may_retry) co_return true;
  Error e = watch->end_error().value_or(Error::make(Errc::network, "stream ended"));
  e.message = "WATCH " + target + ": " + e.message;
  fail_watch_open(*st, std::move(e));
  co_return false;
}

}  // namespace

awaitable<void> run_watch(std::shared_ptr<WatchState> st, Connector& connector, Http2Pool* h2,
                          const TransportOptions& options, http::request<http::string_body> req,
                          std::shared_ptr<ssl::context> context, std::size_t cert_id,
                          std::chrono::steady_clock::time_point deadline,
                          std::shared_ptr<const Codec> codec,
                          std::chrono::milliseconds requested_idle_timeout) {
  st->idle_timer.emplace(co_await asio::this_coro::executor);
  st->pause_timer.emplace(co_await asio::this_coro::executor,
                          asio::steady_timer::time_point::max());
  st->signal_timer.emplace(co_await asio::this_coro::executor);
  const auto idle_timeout = watch_idle_timeout(
      requested_idle_timeout > std::chrono::milliseconds::zero() ? requested_idle_timeout
                                                                 : options.watch_idle_timeout,
      req.target());
  ConnectionPtr http1;  // a connection on which the server chose HTTP/1.1
  if (h2 != nullptr && context) {
    const std::string target(req.target());
    const std::vector<HeaderField> fields = http2_request_fields(req);
    for (int attempt = 0; attempt < 2; ++attempt) {
      auto lease = co_await h2->acquire(context, cert_id, deadline);
      if (!lease) {
        fail_watch_open(*st, std::move(lease).error());
        co_return;
      }
      if (lease.value().http1) {
        http1 = std::move(lease.value().http1);
        break;
      }
      std::shared_ptr<Http2Session> session = std::move(lease.value().session);
      const bool may_retry = attempt == 0;
      const bool again = co_await run_watch_h2(st, session, options, target, fields, deadline,
                                               codec, idle_timeout, may_retry);
      if (!again) co_return;
    }
  }
  if (!http1) {
    auto made = co_await connector.connect(context, cert_id, deadline);
    if (!made) {
      fail_watch_open(*st, std::move(made).error());
      co_return;
    }
    http1 = made.value();
  }
  st->conn = std::move(http1);
  Connection& conn = *st->conn;
  conn.expires_at(deadline);
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  error_code ec =
      co_await conn.with_stream([&](auto& s) { return write_header(s, conn.buffer, req, parser); });
  if (ec) {
    conn.close();
    fail_watch_open(*st, from_ec(ec, "WATCH " + std::string(req.target())));
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
    fail_watch_open(*st, std::move(e));
    co_return;
  }
  {
    std::lock_guard lock(st->mu);
    st->head = std::move(head);
    st->phase = Phase::open;
    st->cv.notify_all();
  }
  conn.expires_never();
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
        if (auto stream = st->h2.lock()) stream->resume();
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
    if (auto stream = st->h2.lock()) {
      stream->rearm_idle();
      return;
    }
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
