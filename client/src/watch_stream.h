#pragma once
// Private: a streaming watch response, on an HTTP/2 stream of a shared connection or on an
// HTTP/1.1 connection of its own: what reads it on the io thread (decoding events, flow control
// when the reader is far behind) and the WatchStream the reader pulls them from, joined by one
// WatchState.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "connection.h"
#include "kinformer/client/resource.h"
#include "kinformer/client/watch.h"
#include "net.h"
#include "transport.h"

namespace kinformer::client::detail {

class Http2Pool;

/// A watch on an HTTP/2 stream, as its WatchState reaches it (io thread only): the reader has
/// caught up (give the stream's window back), cancelled, or changed the read-idle deadline.
class WatchStreamIo {
 public:
  virtual ~WatchStreamIo() = default;
  virtual void resume() = 0;
  virtual void cancel() = 0;
  virtual void rearm_idle() = 0;
};

/// The events a watch has decoded and its reader has not taken yet, oldest first, with each
/// one's share of the bytes received. It holds no memory while empty: most watches are idle most
/// of the time, and a std::deque keeps a 512-byte block and its map even when empty.
class EventQueue {
 public:
  struct Queued {
    WatchEvent event;
    std::size_t bytes;  // its share of the received lines
  };

  [[nodiscard]] bool empty() const { return head_ == items_.size(); }
  [[nodiscard]] std::size_t size() const { return items_.size() - head_; }
  /// Slots allocated, taken ones included (0 while empty).
  [[nodiscard]] std::size_t capacity() const { return items_.capacity(); }
  void push_back(Queued queued) { items_.push_back(std::move(queued)); }
  [[nodiscard]] Queued& front() { return items_[head_]; }
  void pop_front() {
    items_[head_].event.object.reset();
    if (++head_ == items_.size()) {
      std::vector<Queued>().swap(items_);
      head_ = 0;
    } else if (head_ >= kCompactAfter && head_ * 2 >= items_.size()) {
      // Taken events fill at least half: move the rest down (each event moves O(1) times), and
      // give back what a burst left once it is mostly unused.
      items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
      if (items_.capacity() > 4 * items_.size() + kCompactAfter) items_.shrink_to_fit();
    }
  }

 private:
  static constexpr std::size_t kCompactAfter = 64;
  std::vector<Queued> items_;
  std::size_t head_ = 0;  // items_[0, head_) are taken
};

/// Shared between a WatchStreamImpl (the reader's thread) and its coroutine (the io thread).
struct WatchState {
  /// The stream's one state (guarded by mu):
  ///   opening -> open | open_failed (`error`)       the request and its response headers
  ///   open <-> paused                              flow control: the reader is far behind
  ///   open -> ended | failed (`error`)             the server ended the body / reading failed
  ///   open, paused, ended, failed -> cancelled     the reader cancelled (final)
  enum class Phase { opening, open_failed, open, paused, ended, failed, cancelled };
  std::mutex mu;
  std::condition_variable cv;
  Phase phase = Phase::opening;  // guarded by mu
  std::optional<Error> error;    // guarded by mu: why open_failed / failed
  EventQueue events;             // guarded by mu
  std::size_t queued_bytes = 0;  // guarded by mu: sum of events[].bytes
  HttpResponse head;             // guarded by mu: the response headers
  std::size_t limit = 4096;
  std::size_t bytes_limit = std::size_t{64} << 20;
  asio::any_io_executor ex;
  // io thread only
  ConnectionPtr conn;               // HTTP/1.1: the watch's own connection
  std::weak_ptr<WatchStreamIo> h2;  // HTTP/2: the stream, while it is open
  std::optional<asio::steady_timer> pause_timer;
  std::size_t unsignalled = 0;                     // events queued since the reader was last woken
  std::optional<asio::steady_timer> signal_timer;  // the bound on a deferred wake-up
  bool signal_armed = false;
  /// The read-idle deadline in milliseconds, read before every read (set_idle_timeout() may
  /// change it from the reader's thread, and re-arms the read in progress on the io thread).
  std::atomic<std::int64_t> idle_timeout_ms{0};
  bool reading = false;                          // io thread only: a body read is in progress
  bool idle_fired = false;                       // io thread only: the idle timer ended it
  std::uint64_t idle_generation = 0;             // io thread only: which arming is current
  std::chrono::milliseconds idle_armed{0};       // io thread only: the deadline armed last
  std::optional<asio::steady_timer> idle_timer;  // io thread only: the read-idle deadline

  /// The reader's notify_when_ready() request, called once when it is ready (guarded by mu).
  std::function<void()> waker;

  // next() would not block (mu held).
  [[nodiscard]] bool ready() const {
    return !events.empty() ||
           (phase != Phase::open && phase != Phase::paused && phase != Phase::opening);
  }
  // Wakes the reader: next()'s condition wait, and a waiting notify_when_ready() request when it
  // is ready (called after `lock`, which holds mu, is released).
  void notify_reader(std::unique_lock<std::mutex>& lock) {
    cv.notify_all();
    std::function<void()> wake;
    if (waker && ready()) wake = std::exchange(waker, nullptr);
    lock.unlock();
    if (wake) wake();
  }
  // The reader is far behind: stop reading the socket (mu held).
  [[nodiscard]] bool full() const { return events.size() >= limit || queued_bytes >= bytes_limit; }
  // It has caught up far enough to read again (mu held).
  [[nodiscard]] bool drained() const {
    return events.size() <= limit / 2 && queued_bytes <= bytes_limit / 2;
  }
  // Ends the coroutine's reads (io thread).
  void cancel_io() {
    if (conn) conn->close();
    if (auto stream = h2.lock()) stream->cancel();
    if (pause_timer) pause_timer->cancel();
    if (signal_timer) signal_timer->cancel();
  }
};

/// Sends `req` on a stream of an HTTP/2 connection of `h2` (when not null and the server speaks
/// it), else on a new HTTP/1.1 connection, and reads the response into `st` until it ends,
/// fails or is cancelled: a non-200 response is read (bounded) and mapped to its API error. A
/// stream the server did not process (GOAWAY, REFUSED_STREAM), or that the network or the server
/// cut off before any answer, is sent once more. Io thread.
awaitable<void> run_watch(std::shared_ptr<WatchState> st, Connector& connector, Http2Pool* h2,
                          const TransportOptions& options, http::request<http::string_body> req,
                          std::shared_ptr<ssl::context> context, std::size_t cert_id,
                          std::chrono::steady_clock::time_point deadline,
                          std::shared_ptr<const Codec> codec,
                          std::chrono::milliseconds idle_timeout = {});

/// The reader's side. next() from one thread at a time; cancel() from any thread.
class WatchStreamImpl final : public WatchStream {
 public:
  /// `keep_alive` (the Transport) keeps the io thread running while the stream lives.
  WatchStreamImpl(std::shared_ptr<const void> keep_alive, std::shared_ptr<WatchState> state)
      : keep_alive_(std::move(keep_alive)), state_(std::move(state)) {}
  // NOLINTNEXTLINE(bugprone-exception-escape): only bad_alloc can escape; terminate is right then
  ~WatchStreamImpl() override { cancel(); }

  Result<std::optional<WatchEvent>> next() override;
  void cancel() override;
  [[nodiscard]] std::size_t buffered() const override;
  void set_idle_timeout(std::chrono::milliseconds timeout) override;
  bool notify_when_ready(std::function<void()> wake) override;

 private:
  std::shared_ptr<const void> keep_alive_;  // destroyed after state_
  std::shared_ptr<WatchState> state_;
};

}  // namespace kinformer::client::detail
