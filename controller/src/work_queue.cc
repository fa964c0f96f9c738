#include "kinformer/controller/work_queue.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <stop_token>
#include <unordered_map>

#include "delayed_keys.h"
#include "kinformer/client/token_bucket.h"
#include "work_queue_metrics.h"

namespace kinformer::controller {
namespace detail {

// The queue's state and the rules that change it. Every *_locked member runs under mu.
class WorkQueueState {
 public:
  using TimePoint = Clock::TimePoint;

  WorkQueueState(ClockPtr c, RateLimiterPtr limiter, std::shared_ptr<informer::MetricsRegistry> r,
                 const std::string& name)
      : clock(std::move(c)), rate_limiter(std::move(limiter)), metrics(std::move(r), name) {}

  // The dirty set: `key` becomes waiting to be handed out unless it is already. A key being
  // processed is queued by done(), not here: one worker per key.
  void add_locked(const std::string& key, TimePoint now) {
    if (!dirty.emplace(key, now).second) return;
    metrics.added(dirty.size());
    if (processing.contains(key)) return;
    queue.push_back(key);
    wake_one_locked();
  }

  // A ready key for a worker: one idle waiter, or else the worker sleeping on the clock for the
  // earliest delayed key (it may be the only worker there is).
  void wake_one_locked() {
    cv.notify_one();
    if (queue.size() > idle) wake_sleeper_locked();
  }

  void wake_sleeper_locked() {
    if (sleeper) sleeper_wake.request_stop();
  }

  // Delayed keys that are due become ready (client-go's waitingLoop, run by whoever calls).
  void promote_due_locked(TimePoint now) {
    if (waiting.empty()) return;
    for (const auto& key : waiting.take_due(now)) add_locked(key, now);
  }

  void drop_keys_locked() {
    queue.clear();
    dirty.clear();
    waiting.clear();
    metrics.depth(0);
  }

  void update_unfinished_locked(TimePoint now) {
    double total = 0;
    double longest = 0;
    for (const auto& [key, started] : processing) {
      const double s = seconds(now - started);
      total += s;
      longest = std::max(longest, s);
    }
    metrics.unfinished(total, longest);
  }

  static double seconds(Clock::Duration d) { return std::chrono::duration<double>(d).count(); }

  const ClockPtr clock;
  const RateLimiterPtr rate_limiter;
  WorkQueueMetrics metrics;

  mutable std::mutex mu;
  std::condition_variable cv;          // get() waiters: a key is ready, or shutdown
  std::condition_variable drained_cv;  // shut_down_with_drain(): processing emptied, or shut_down()
  std::deque<std::string> queue;       // guarded by mu: ready keys, in order; each also in dirty
  // guarded by mu: keys waiting to be handed out (ready, or added while processing), with the
  // time each was added (workqueue_queue_duration_seconds)
  std::unordered_map<std::string, TimePoint> dirty;
  // guarded by mu: keys handed out and not done() yet, with the time each was handed out
  std::unordered_map<std::string, TimePoint> processing;
  DelayedKeys waiting;              // guarded by mu
  std::size_t idle = 0;             // guarded by mu: get() callers waiting on cv
  bool sleeper = false;             // guarded by mu: a get() caller sleeps on the clock
  TimePoint sleeper_until{};        // guarded by mu: ... until then
  std::stop_source sleeper_wake{};  // guarded by mu: ... and wakes when this is stopped
  bool shutting_down = false;       // guarded by mu
  bool hard_stop = false;           // guarded by mu: shut_down() was called
  std::size_t draining = 0;         // guarded by mu: shut_down_with_drain() callers waiting
};

}  // namespace detail

WorkQueue::WorkQueue(WorkQueueOptions options) : name_(std::move(options.name)) {
  ClockPtr clock = options.clock ? std::move(options.clock) : informer::system_clock();
  RateLimiterPtr limiter = options.rate_limiter ? std::move(options.rate_limiter)
                                                : default_controller_rate_limiter({}, clock);
  state_ = std::make_unique<detail::WorkQueueState>(std::move(clock), std::move(limiter),
                                                    std::move(options.registry), name_);
}

WorkQueue::~WorkQueue() { shut_down(); }

void WorkQueue::add(const std::string& key) {
  auto& s = *state_;
  std::lock_guard lock(s.mu);
  if (s.shutting_down) return;
  const auto now = s.clock->now();
  s.promote_due_locked(now);
  s.add_locked(key, now);
}

void WorkQueue::add_after(const std::string& key, Duration delay) {
  auto& s = *state_;
  std::lock_guard lock(s.mu);
  if (s.shutting_down) return;
  s.metrics.retried();
  const auto now = s.clock->now();
  s.promote_due_locked(now);
  if (delay <= Duration::zero()) {
    s.add_locked(key, now);
    return;
  }
  const auto due = now + std::min(delay, client::TokenBucket::kMaxWait);
  if (!s.waiting.add(key, due)) return;  // it waits for an earlier due already
  if (s.sleeper) {
    if (due < s.sleeper_until) s.wake_sleeper_locked();  // sleep until this one instead
  } else if (s.idle > 0) {
    s.cv.notify_one();  // an idle worker becomes the one that sleeps on the clock
  }
}

void WorkQueue::add_rate_limited(const std::string& key) {
  if (shutting_down()) return;
  add_after(key, state_->rate_limiter->when(key));
}

void WorkQueue::forget(const std::string& key) { state_->rate_limiter->forget(key); }

int WorkQueue::num_requeues(const std::string& key) {
  return state_->rate_limiter->num_requeues(key);
}

std::optional<std::string> WorkQueue::get() {
  auto& s = *state_;
  std::unique_lock lock(s.mu);
  for (;;) {
    if (s.shutting_down) return std::nullopt;
    const auto now = s.clock->now();
    s.promote_due_locked(now);
    if (!s.queue.empty()) {
      std::string key = std::move(s.queue.front());
      s.queue.pop_front();
      auto added = s.dirty.extract(key);
      s.processing.emplace(key, now);
      s.metrics.taken(s.dirty.size(), detail::WorkQueueState::seconds(now - added.mapped()));
      s.update_unfinished_locked(now);
      // Keys still wait for their delay and nobody sleeps on the clock for them: an idle
      // worker takes that over.
      if (!s.waiting.empty() && !s.sleeper && s.idle > 0) s.cv.notify_one();
      return key;
    }
    if (!s.waiting.empty() && !s.sleeper) {
      // Sleep on the clock until the earliest delayed key is due, or until woken: a ready key
      // with no idle worker to take it, an earlier delayed key, shutdown.
      s.sleeper = true;
      s.sleeper_until = *s.waiting.earliest();
      s.sleeper_wake = std::stop_source();
      const std::stop_token wake = s.sleeper_wake.get_token();
      const auto wait = s.sleeper_until - now;
      lock.unlock();
      s.clock->sleep_for(wait, wake);
      lock.lock();
      s.sleeper = false;
      continue;
    }
    ++s.idle;
    s.cv.wait(lock);
    --s.idle;
  }
}

void WorkQueue::done(const std::string& key) {
  auto& s = *state_;
  std::lock_guard lock(s.mu);
  auto it = s.processing.find(key);
  if (it == s.processing.end()) return;
  const auto now = s.clock->now();
  s.metrics.done(detail::WorkQueueState::seconds(now - it->second));
  s.processing.erase(it);
  s.update_unfinished_locked(now);
  if (s.dirty.contains(key)) {
    s.queue.push_back(key);  // added while it was processed: its turn again
    s.wake_one_locked();
  }
  if (s.processing.empty() && s.draining > 0) s.drained_cv.notify_all();
}

std::size_t WorkQueue::len() {
  auto& s = *state_;
  std::lock_guard lock(s.mu);
  if (!s.shutting_down) s.promote_due_locked(s.clock->now());
  return s.queue.size();
}

void WorkQueue::shut_down() {
  auto& s = *state_;
  std::lock_guard lock(s.mu);
  s.shutting_down = true;
  s.hard_stop = true;
  s.drop_keys_locked();
  s.cv.notify_all();
  s.wake_sleeper_locked();
  s.drained_cv.notify_all();
}

void WorkQueue::shut_down_with_drain() {
  auto& s = *state_;
  std::unique_lock lock(s.mu);
  s.shutting_down = true;
  s.drop_keys_locked();
  s.cv.notify_all();
  s.wake_sleeper_locked();
  ++s.draining;
  s.drained_cv.wait(lock, [&] { return s.processing.empty() || s.hard_stop; });
  --s.draining;
}

bool WorkQueue::shutting_down() const {
  std::lock_guard lock(state_->mu);
  return state_->shutting_down;
}

bool WorkQueue::draining() const {
  std::lock_guard lock(state_->mu);
  return state_->draining > 0;
}

void WorkQueue::update_metrics() {
  auto& s = *state_;
  std::lock_guard lock(s.mu);
  const auto now = s.clock->now();
  if (!s.shutting_down) s.promote_due_locked(now);
  s.update_unfinished_locked(now);
}

}  // namespace kinformer::controller
