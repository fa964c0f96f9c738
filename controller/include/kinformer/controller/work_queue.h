#pragma once
// WorkQueue: client-go's rate-limited work queue (k8s.io/client-go/util/workqueue) for
// controllers: keys ("namespace/name"), not objects.

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "kinformer/controller/rate_limiter.h"
#include "kinformer/informer/clock.h"
#include "kinformer/informer/metrics_registry.h"

namespace kinformer::controller {

namespace detail {
class WorkQueueState;
}  // namespace detail

/// WorkQueue settings.
struct WorkQueueOptions {
  /// The queue's name: the `name` label of its metrics. Required with a registry.
  std::string name;
  /// Time for delays, rate limits and metrics. Null: system_clock().
  ClockPtr clock;
  /// Null: default_controller_rate_limiter() on `clock`.
  RateLimiterPtr rate_limiter;
  /// Null: no metrics. Otherwise client-go's workqueue_* metrics, labelled name=<name>; the
  /// queue keeps the registry alive and removes its series when destroyed.
  std::shared_ptr<informer::MetricsRegistry> registry;
};

/// A queue of keys with client-go's workqueue rules:
///
/// - A key added again before a worker takes it is handed out once (the dirty set).
/// - A key is never handed to two workers at once (the processing set): get() hands a key out,
///   done(key) ends its processing. A key added while it is being processed is handed out again
///   after done(key).
/// - add_after() makes a key wait for a delay on the queue's clock; a key waiting already keeps
///   the earlier due time. add_rate_limited() waits as long as the RateLimiter says; forget()
///   starts a key's retries over.
/// - Keys are handed out in the order they became ready (FIFO).
///
/// Threads: none of its own. A worker blocked in get() while keys wait for their delay sleeps
/// on the clock until the earliest is due (one such worker at a time; the others wait on a
/// condition variable), and every call first moves the keys that are due into the queue. So a
/// delayed key becomes ready (and counted in len() and workqueue_depth) when the queue is next
/// used after its due time, at the latest when it is due if a worker waits in get().
///
/// Metrics (WorkQueueOptions::registry): workqueue_depth, _adds_total, _queue_duration_seconds,
/// _work_duration_seconds and _retries_total move with each call; workqueue_unfinished_work_seconds
/// and _longest_running_processor_seconds are set on each get() and done() and by
/// update_metrics(). client-go refreshes those two every 500 ms from a goroutine; a controller
/// runner (or the owner) calls update_metrics() as often, so a stuck worker's time grows
/// between calls too.
///
/// Thread-safety: thread-safe; no concurrent call causes a data race. Lifetime: every thread
/// that may call get() must have returned from it before the queue is destroyed (shut_down(),
/// then join the workers); the destructor calls shut_down().
class WorkQueue {
 public:
  using Duration = Clock::Duration;

  /// Throws client::ConfigError when a registry is given without a name, or when a queue of the
  /// same name already has metrics in that registry.
  explicit WorkQueue(WorkQueueOptions options = {});
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  /// Queues `key` unless it waits to be handed out already; if it is being processed, it is
  /// handed out again after done(key). Does nothing after shutdown.
  void add(const std::string& key);
  /// add(key) once `delay` has passed on the clock (at once when `delay` <= 0). A key waiting
  /// for an earlier due time keeps it; a later one is replaced. Counts a retry
  /// (workqueue_retries_total, as client-go's AddAfter does). Does nothing after shutdown.
  /// Delays are capped at 100 years.
  void add_after(const std::string& key, Duration delay);
  /// add_after(key, rate_limiter.when(key)): counts a retry of `key` and waits as long as the
  /// rate limiter says. Does nothing after shutdown.
  void add_rate_limited(const std::string& key);
  /// The rate limiter forgets `key`: call it when the key was processed successfully. It does
  /// not remove the key from the queue.
  void forget(const std::string& key);
  /// The retries of `key` the rate limiter counts (since forget()).
  [[nodiscard]] int num_requeues(const std::string& key);

  /// Blocks until a key is ready and hands it out (marking it processing), or until shutdown:
  /// then std::nullopt, at once, also for callers already waiting. The caller must call
  /// done(key) when it has finished with the key.
  [[nodiscard]] std::optional<std::string> get();
  /// Ends the processing of `key` (handed out by get()); if it was added meanwhile, queues it
  /// again. A key not being processed is ignored.
  void done(const std::string& key);

  /// The keys ready to be handed out (client-go's Len): neither the keys waiting for their
  /// delay nor a key added while being processed (until its done()). Moves due keys first.
  [[nodiscard]] std::size_t len();

  /// Stops at once: every get() returns std::nullopt (the waiting ones wake), later adds are
  /// ignored and the keys not yet handed out (ready, waiting for a delay, or added again while
  /// being processed) are dropped. done() may still be called for keys handed out. Idempotent.
  void shut_down();
  /// Stops as shut_down() does, then waits until every key handed out has been done(). Must
  /// not be called by a worker holding a key (it would wait for itself). A shut_down() from
  /// another thread ends the wait. Unlike client-go's ShutDownWithDrain, keys not yet handed out
  /// are dropped, not handed out: a controller reconciles everything when it starts again.
  void shut_down_with_drain();
  /// True once shut_down() or shut_down_with_drain() has been called.
  [[nodiscard]] bool shutting_down() const;
  /// True while a shut_down_with_drain() waits for keys being processed.
  [[nodiscard]] bool draining() const;

  /// Moves due keys into the queue and sets workqueue_unfinished_work_seconds and
  /// workqueue_longest_running_processor_seconds from the keys being processed now.
  void update_metrics();

  [[nodiscard]] const std::string& name() const noexcept { return name_; }

 private:
  const std::string name_;
  std::unique_ptr<detail::WorkQueueState> state_;
};

using WorkQueuePtr = std::unique_ptr<WorkQueue>;

}  // namespace kinformer::controller
