#pragma once
// Controller: the controller runner. Informers' handlers queue keys, workers reconcile them
// (client-go's controller pattern: a work queue fed by informers, WaitForCacheSync, N workers).

#include <chrono>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <vector>

#include "kinformer/client/log.h"
#include "kinformer/client/object.h"
#include "kinformer/client/result.h"
#include "kinformer/controller/rate_limiter.h"
#include "kinformer/controller/work_queue.h"
#include "kinformer/informer/metrics_registry.h"
#include "kinformer/informer/shared_informer.h"

namespace kinformer::controller {

namespace detail {
class ControllerState;
}  // namespace detail

/// Reconciles one key ("namespace/name"): an error (or an exception) retries the key after the
/// queue's rate limiter's delay; success forgets its retries.
using Reconciler = std::function<client::Status(const std::string& key)>;
/// The keys an object's change queues; by default its own key (client::Object::key()).
using KeyFunc = std::function<std::vector<std::string>(const client::Object& object)>;

/// Controller settings.
struct ControllerOptions {
  /// Names the queue (its metrics' `name` label) and every log line (required).
  std::string name;
  /// Called by the workers, one key at a time per worker, never for one key on two workers at
  /// once (required).
  Reconciler reconcile;
  /// Worker threads (at least 1).
  int workers = 1;
  /// Time for the queue's delays and rate limits, the sync polls and the metrics refresh.
  /// Null: system_clock().
  informer::ClockPtr clock;
  /// Null: default_controller_rate_limiter() on `clock`.
  RateLimiterPtr rate_limiter;
  /// Null: no metrics. Otherwise the queue's workqueue_* metrics (see WorkQueueOptions).
  std::shared_ptr<informer::MetricsRegistry> registry;
  /// How often the caches' has_synced is polled before the workers start (client-go: 100 ms).
  std::chrono::milliseconds sync_poll_period{100};
  /// How often WorkQueue::update_metrics() runs while the workers run (client-go: 500 ms).
  std::chrono::milliseconds metrics_period{500};
  /// Where log lines go (component "controller", field controller=<name>). Null: stderr.
  client::LogSink log;
};

/// Runs a reconcile loop over keys:
///
/// - watch(informer) registers a handler that queues the key of every object added, updated or
///   deleted (also a delete whose final state is unknown: a tombstone carries the last known
///   object, and so its key).
/// - run() waits until every watched handler has synced (received the informer's initial list)
///   and every function given to wait_for() says synced, polling on the clock; only then do the
///   workers start.
/// - Each worker takes a key, calls reconcile(key); an error or an exception logs it and calls
///   add_rate_limited(key) (5 ms doubling to 1000 s per key by default), success calls
///   forget(key); then done(key).
/// - When stop is requested: the queue shuts down with drain (running reconciles finish, queued
///   keys are dropped), the workers are joined, the handlers are closed.
///
/// One run per Controller: to reconcile only while leading, make a Controller inside
/// LeaderCallbacks::on_started_leading and run() it with the token given there; a new leader
/// reconciles everything again (the new handlers receive the current contents).
///
/// Threads: the caller's in run() (start() makes one), plus `workers`.
/// Thread-safety: thread-safe; watch() and wait_for() must come before run()/start().
/// Lifetime: the informers must outlive the run (or the Controller); the destructor calls stop().
class Controller {
 public:
  /// Throws client::ConfigError naming the field: an empty name, a null reconcile, workers < 1,
  /// a sync_poll_period or metrics_period not positive; or as WorkQueue's constructor does.
  explicit Controller(ControllerOptions options);
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  /// Queues keys for every notification of `informer`: `keys(object)`, or the object's key.
  /// Throws std::logic_error once run() or start() was called.
  void watch(informer::SharedInformer& informer, KeyFunc keys = {});
  /// One more condition the workers wait for, e.g. the has_synced of an informer the reconcile
  /// reads without watching it. Throws std::logic_error once run() or start() was called.
  void wait_for(std::function<bool()> has_synced);

  /// Blocks: waits for the caches, runs the workers until `stop` is requested, then drains and
  /// returns. Once per Controller (a second call, or one after start(), throws std::logic_error).
  void run(const std::stop_token& stop);
  /// run() on a thread of the controller's own.
  void start();
  /// Requests start()'s run to stop and joins it. Idempotent; does nothing for run() (stop its
  /// token instead). Not from a reconcile (it would wait for itself).
  void stop();

  /// True once the caches synced and the workers started.
  [[nodiscard]] bool workers_started() const;
  /// The controller's queue: e.g. to add keys from elsewhere.
  [[nodiscard]] WorkQueue& queue();
  [[nodiscard]] const std::string& name() const noexcept { return name_; }

 private:
  const std::string name_;
  std::unique_ptr<detail::ControllerState> state_;
};

using ControllerPtr = std::unique_ptr<Controller>;

}  // namespace kinformer::controller
