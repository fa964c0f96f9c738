#pragma once
// HandlerExecutor: a bounded pool of worker threads that runs handlers as serial strands, and
// compensates for workers blocked in a handler.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "kinformer/client/log.h"

namespace kinformer::informer {

namespace detail {
class ExecutorState;
class StrandState;
}  // namespace detail

/// Configuration of a HandlerExecutor. Plain values; validated by the HandlerExecutor constructor.
struct HandlerExecutorOptions {
  /// Workers that run strands at once. 0: std::thread::hardware_concurrency(), at least 2.
  std::size_t threads = 0;
  /// A single drain() running longer than this no longer counts against `threads`: the monitor
  /// marks its worker blocked and, while work waits, starts a replacement. Must be positive.
  std::chrono::milliseconds blocking_threshold{200};
  /// Cap on replacement workers alive at once beyond `threads`. Past it, ready work waits until a
  /// worker returns from its drain(); 0 disables compensation.
  std::size_t max_extra_threads = 64;
  /// Where the pool's log lines go (a handler that threw or blocks, the cap reached). Null:
  /// stderr. The factory passes FactoryOptions::log.
  client::LogSink log;
  /// Per cause (the factory passes FactoryOptions::log_rate_limit).
  client::LogRateLimit log_rate_limit;
};

/// Runs the work of many owners (strands) on a pool of O(threads) worker threads, never one
/// thread per owner. Each strand's drain() calls are serial; ready strands are served round
/// robin. A monitor thread, ticking every blocking_threshold/2, notices a worker whose drain()
/// runs past blocking_threshold and, while work waits and fewer than `threads` workers are
/// un-blocked, starts a replacement worker (as Go's runtime does around blocking system calls),
/// up to max_extra_threads alive at once. A replacement exits when it finds more than `threads`
/// un-blocked workers (the blocked one returned), so the pool shrinks back to its size. A
/// replacement starts within one tick of the threshold, or of work arriving while every worker is
/// blocked. Past the cap, ready strands wait until some worker returns from its drain().
///
/// Lifetime: owned by the InformerFactory. Its state is shared with every worker and strand, so a
/// worker detached by shutdown() and a Strand that outlives the executor never dangle. The
/// destructor calls shutdown(kDefaultShutdownTimeout); calling it (or shutdown()) from inside a
/// drain() of this pool is allowed: that worker is detached, not joined, and exits when the drain()
/// returns, which must not use the executor afterwards.
/// Thread-safety: every member function may be called concurrently from any thread.
class HandlerExecutor {
 public:
  class Strand;

  /// Timeout of the shutdown the destructor performs.
  static constexpr std::chrono::milliseconds kDefaultShutdownTimeout{5000};

  /// Starts the workers and the monitor. Throws std::invalid_argument for a non-positive
  /// blocking_threshold, std::system_error if a thread cannot be started.
  explicit HandlerExecutor(const HandlerExecutorOptions& options = {});
  HandlerExecutor(const HandlerExecutor&) = delete;
  HandlerExecutor& operator=(const HandlerExecutor&) = delete;
  /// shutdown(kDefaultShutdownTimeout).
  ~HandlerExecutor();

  /// Creates an idle strand whose turns call `drain` on a worker. drain() should run one bounded
  /// batch of the owner's work and return true if more remains (the strand then goes to the back
  /// of the ready queue). An exception thrown by drain() is caught and logged, and counts as
  /// "no more work". `name` names the strand in log lines (a handler's name). drain() and the
  /// objects it uses must stay valid until close() and wait_idle() have returned, or until the
  /// executor is shut down and its workers have returned.
  [[nodiscard]] std::shared_ptr<Strand> make_strand(std::function<bool()> drain, std::string name);

  /// Stops accepting work (queued turns are dropped, wake() becomes a no-op), waits up to
  /// `timeout` for running drain() calls to return, joins those workers and the monitor, and
  /// detaches workers still inside a drain() (logged with the strand's name); a detached worker
  /// exits when its drain() returns. Idempotent; a concurrent call waits for the first. Bounded
  /// by `timeout` (plus joining threads that have already returned). Called from inside a drain()
  /// of this pool, it does not wait for (or join) its own worker.
  void shutdown(std::chrono::milliseconds timeout);

  /// Live worker threads plus the monitor (detached workers still in a drain() included).
  [[nodiscard]] std::size_t thread_count() const;
  /// Workers whose current drain() has run past blocking_threshold.
  [[nodiscard]] std::size_t blocked_workers() const;
  /// Replacement workers started since construction.
  [[nodiscard]] std::uint64_t extra_threads_started() const;
  /// The resolved pool size (options.threads, or its default).
  [[nodiscard]] std::size_t pool_size() const;

  /// Strand::wake() for each of `strands` (null entries are not allowed), with one lock of each
  /// executor's ready queue and one round of worker wake-ups for all of them: an informer hands
  /// one event to many handlers this way. Thread-safe; callable from any thread.
  static void wake_all(std::span<Strand* const> strands);

 private:
  std::shared_ptr<detail::ExecutorState> state_;
};

/// A serial queue of one owner's work on a HandlerExecutor. Made by make_strand(); idle until the
/// first wake().
///
/// State machine: idle -(wake)-> scheduled -(worker)-> running -(drain false)-> idle; running
/// -(wake, or drain true)-> scheduled again at the back of the ready queue. A wake() while
/// running is never lost: drain() runs once more after the current turn. close() is terminal.
///
/// Lifetime: may outlive its executor (every call is then a no-op or returns at once); the
/// destructor calls close() but does not wait.
/// Thread-safety: every member function may be called concurrently from any thread, including
/// from inside this strand's own drain().
class HandlerExecutor::Strand {
 public:
  explicit Strand(std::shared_ptr<detail::StrandState> state);
  Strand(const Strand&) = delete;
  Strand& operator=(const Strand&) = delete;
  /// close(); does not wait for a running drain().
  ~Strand();

  /// Asks for a turn. Idempotent and cheap (one uncontended lock; the pool's lock only when the
  /// strand was idle): an idle strand is put on the ready queue once, a scheduled strand is left
  /// as it is, a running strand runs drain() again after this turn. Call it once per batch of
  /// work, not once per item. No-op after close() or shutdown.
  void wake();
  /// No drain() call starts after close() returns; a running one finishes normally (use
  /// wait_idle() to wait for it). Releases the executor's copy of drain once none runs.
  /// Idempotent.
  void close();
  /// Waits up to `timeout` until no drain() of this strand runs; true if none does. Meant for after
  /// close() (before it, a later wake() may start another turn). From inside this strand's own
  /// drain() it returns false at once instead of deadlocking.
  [[nodiscard]] bool wait_idle(std::chrono::milliseconds timeout);
  /// True when called from inside this strand's drain(), on the worker running it.
  [[nodiscard]] bool running_here() const;
  /// Times the strand was put on the ready queue (by wake() or to run again), for tests of
  /// batching.
  [[nodiscard]] std::uint64_t schedules() const;
  /// The name given to make_strand().
  [[nodiscard]] const std::string& name() const;

 private:
  friend class HandlerExecutor;  // wake_all
  std::shared_ptr<detail::StrandState> state_;
};

using HandlerExecutorPtr = std::shared_ptr<HandlerExecutor>;
using StrandPtr = std::shared_ptr<HandlerExecutor::Strand>;

}  // namespace kinformer::informer
