#include "kinformer/informer/handler_executor.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <exception>
#include <list>
#include <mutex>
#include <span>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace kinformer::informer {
namespace detail {
namespace {

using SteadyClock = std::chrono::steady_clock;

}  // namespace

/// One strand's turn-taking state. Shared by its Strand handle, the ready queue and the worker
/// running it. Thread-safe.
class StrandState {
 public:
  StrandState(std::shared_ptr<ExecutorState> executor, std::function<bool()> drain,
              std::string name)
      : executor_(std::move(executor)), name_(std::move(name)), drain_(std::move(drain)) {}

  /// Takes a turn: unless closed, marks the strand running and calls drain() (without any lock).
  /// Returns true if the strand must go to the back of the ready queue (it is then "scheduled").
  /// Called only by a worker that took this strand off the ready queue.
  bool run_turn();
  void wake(const std::shared_ptr<StrandState>& self);
  /// The state half of wake(): true if the strand went from idle to scheduled, i.e. the caller
  /// must push it on its executor's ready queue.
  bool mark_woken();
  void close();
  bool wait_idle(std::chrono::milliseconds timeout);
  [[nodiscard]] bool running_here() const;
  [[nodiscard]] std::uint64_t schedules() const;
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] ExecutorState* executor() const noexcept { return executor_.get(); }

 private:
  enum class Phase {
    idle,       // not queued; the next wake() queues it
    scheduled,  // on the ready queue (or being requeued); wake() is a no-op
    running,    // a worker is in drain(); wake() -> rerun
    rerun,      // in drain(), woken meanwhile: queued again after this turn
  };
  [[nodiscard]] bool in_drain() const { return phase_ == Phase::running || phase_ == Phase::rerun; }

  const std::shared_ptr<ExecutorState> executor_;
  const std::string name_;

  mutable std::mutex mu_;
  std::condition_variable idle_cv_;  // notified when a turn ends
  // guarded by mu_; called without mu_ by the worker that set phase_ to running, and released by
  // close() only when no turn runs, so the call never races with its destruction.
  std::function<bool()> drain_;
  Phase phase_ = Phase::idle;    // guarded by mu_
  bool closed_ = false;          // guarded by mu_
  std::uint64_t schedules_ = 0;  // guarded by mu_
};

/// The pool: ready queue, workers, monitor. Shared by the HandlerExecutor, every worker thread, the
/// monitor and every strand, so a detached worker never outlives it. Thread-safe.
class ExecutorState : public std::enable_shared_from_this<ExecutorState> {
 public:
  explicit ExecutorState(const HandlerExecutorOptions& options);
  /// Starts the pool's workers and the monitor; once, right after construction.
  void start();
  /// Puts a scheduled strand at the back of the ready queue; drops it after shutdown.
  void push(std::shared_ptr<StrandState> strand);
  /// push() for several strands, under one lock, waking as many workers as there are strands.
  void push_all(std::span<std::shared_ptr<StrandState>> strands);
  void shutdown(std::chrono::milliseconds timeout);
  [[nodiscard]] const client::Logger& log() const noexcept { return log_; }

  [[nodiscard]] std::size_t thread_count() const;
  [[nodiscard]] std::size_t blocked_workers() const;
  [[nodiscard]] std::uint64_t extra_threads_started() const;
  [[nodiscard]] std::size_t pool_size() const noexcept { return threads_; }

 private:
  struct Worker {
    std::thread thread;                   // joined by the monitor or shutdown, or detached
    std::shared_ptr<StrandState> strand;  // guarded by mu_: the strand in drain(), or null
    SteadyClock::time_point started;      // guarded by mu_: when that turn began
    bool blocked = false;                 // guarded by mu_: the turn is past the threshold
    bool exited = false;                  // guarded by mu_: the thread left run_worker()
  };

  void run_worker(Worker* self);
  void run_monitor();
  /// Adds a worker to workers_ and starts its thread. mu_ held. Throws std::system_error.
  void start_worker_locked();
  /// Marks long turns blocked and starts replacements while work waits. mu_ held.
  void compensate_locked(SteadyClock::time_point now, std::vector<std::string>& newly_blocked,
                         bool& cap_reached);
  [[nodiscard]] std::size_t unblocked_locked() const { return live_ - blocked_; }

  const std::size_t threads_;
  const std::chrono::milliseconds threshold_;
  const std::size_t max_extra_;
  const client::Logger log_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;                 // workers: ready_ gained work, or stopping_
  std::condition_variable monitor_cv_;              // the monitor's tick; notified by shutdown
  std::condition_variable exit_cv_;                 // shutdown: a worker exited
  std::deque<std::shared_ptr<StrandState>> ready_;  // guarded by mu_: round robin
  std::list<Worker> workers_;        // guarded by mu_: nodes are stable, exited ones reaped
  std::size_t live_ = 0;             // guarded by mu_: workers not exited
  std::size_t blocked_ = 0;          // guarded by mu_: live workers with blocked set
  std::uint64_t extra_started_ = 0;  // guarded by mu_
  bool stopping_ = false;            // guarded by mu_
  bool cap_logged_ = false;          // guarded by mu_: logged once per episode at the cap
  bool monitor_running_ = false;     // guarded by mu_

  std::mutex shutdown_mu_;  // serializes shutdown(); taken before mu_
  std::thread monitor_;     // guarded by shutdown_mu_ (after start()): joined by shutdown()
  bool shut_down_ = false;  // guarded by shutdown_mu_
};

namespace {
// The strand whose drain() runs on this thread, and the pool and worker this thread belongs to.
thread_local const StrandState* tl_strand = nullptr;
thread_local const ExecutorState* tl_pool = nullptr;
thread_local const void* tl_worker = nullptr;
}  // namespace

// ---- StrandState ----------------------------------------------------------------------------

bool StrandState::run_turn() {
  {
    std::function<bool()> dropped;  // destroyed after the lock is released
    std::lock_guard lock(mu_);
    if (closed_) {
      phase_ = Phase::idle;
      dropped = std::move(drain_);
      idle_cv_.notify_all();
      return false;
    }
    phase_ = Phase::running;
  }
  bool more = false;
  const StrandState* previous = std::exchange(tl_strand, this);
  try {
    more = drain_();
  } catch (const std::exception& e) {
    executor_->log().error("handler drain threw", {{"handler", name_}, {"error", e.what()}});
  } catch (...) {
    executor_->log().error("handler drain threw", {{"handler", name_}});
  }
  tl_strand = previous;

  std::function<bool()> dropped;
  std::lock_guard lock(mu_);
  if (closed_) {
    phase_ = Phase::idle;
    dropped = std::move(drain_);
  } else if (more || phase_ == Phase::rerun) {
    phase_ = Phase::scheduled;
    ++schedules_;
    return true;
  } else {
    phase_ = Phase::idle;
  }
  idle_cv_.notify_all();
  return false;
}

bool StrandState::mark_woken() {
  std::lock_guard lock(mu_);
  if (closed_) return false;
  switch (phase_) {
    case Phase::idle:
      phase_ = Phase::scheduled;
      ++schedules_;
      return true;
    case Phase::running:
      phase_ = Phase::rerun;
      return false;
    case Phase::scheduled:
    case Phase::rerun:
      return false;
  }
  return false;
}

void StrandState::wake(const std::shared_ptr<StrandState>& self) {
  if (mark_woken()) executor_->push(self);
}

void StrandState::close() {
  std::function<bool()> dropped;  // destroyed after the lock is released
  std::lock_guard lock(mu_);
  closed_ = true;
  if (!in_drain()) dropped = std::move(drain_);
}

bool StrandState::wait_idle(std::chrono::milliseconds timeout) {
  if (running_here()) return false;
  std::unique_lock lock(mu_);
  return idle_cv_.wait_for(lock, timeout, [this] { return !in_drain(); });
}

bool StrandState::running_here() const { return tl_strand == this; }

std::uint64_t StrandState::schedules() const {
  std::lock_guard lock(mu_);
  return schedules_;
}

// ---- ExecutorState --------------------------------------------------------------------------

namespace {
std::size_t resolve_threads(std::size_t requested) {
  if (requested != 0) return requested;
  return std::max<std::size_t>(2, std::thread::hardware_concurrency());
}
}  // namespace

ExecutorState::ExecutorState(const HandlerExecutorOptions& options)
    : threads_(resolve_threads(options.threads)),
      threshold_(options.blocking_threshold),
      max_extra_(options.max_extra_threads),
      log_(options.log, "executor", {}, options.log_rate_limit) {
  if (threshold_.count() <= 0) {
    throw std::invalid_argument("HandlerExecutorOptions.blocking_threshold must be positive (got " +
                                std::to_string(threshold_.count()) + " ms)");
  }
}

void ExecutorState::start() {
  std::lock_guard shutdown_lock(shutdown_mu_);
  std::lock_guard lock(mu_);
  for (std::size_t i = 0; i < threads_; ++i) start_worker_locked();
  monitor_ = std::thread([self = shared_from_this()] { self->run_monitor(); });
  monitor_running_ = true;
}

void ExecutorState::start_worker_locked() {
  Worker& worker = workers_.emplace_back();
  try {
    // The thread keeps the state alive: shutdown() may detach it while it is in a drain().
    worker.thread = std::thread([self = shared_from_this(), w = &worker] { self->run_worker(w); });
  } catch (...) {
    workers_.pop_back();
    throw;
  }
  ++live_;
}

void ExecutorState::push(std::shared_ptr<StrandState> strand) {
  std::unique_lock lock(mu_);
  if (stopping_) return;  // `strand` is released after the lock (parameters outlive locals)
  ready_.push_back(std::move(strand));
  lock.unlock();
  work_cv_.notify_one();
}

void ExecutorState::push_all(std::span<std::shared_ptr<StrandState>> strands) {
  if (strands.empty()) return;
  std::unique_lock lock(mu_);
  if (stopping_) return;
  for (auto& strand : strands) ready_.push_back(std::move(strand));
  lock.unlock();
  if (strands.size() >= threads_) {
    work_cv_.notify_all();
  } else {
    for (std::size_t i = 0; i < strands.size(); ++i) work_cv_.notify_one();
  }
}

void ExecutorState::run_worker(Worker* self) {
  tl_pool = this;
  tl_worker = self;
  std::shared_ptr<StrandState> strand;  // the turn's strand; released only without mu_
  std::unique_lock lock(mu_, std::defer_lock);
  for (;;) {
    strand.reset();
    lock.lock();
    for (;;) {
      if (stopping_) break;
      // A replacement whose blocked peer returned: the pool is back at its size, so leave.
      if (unblocked_locked() > threads_) break;
      if (!ready_.empty()) break;
      work_cv_.wait(lock);
    }
    if (stopping_ || unblocked_locked() > threads_) break;
    strand = std::move(ready_.front());
    ready_.pop_front();
    self->strand = strand;
    self->started = SteadyClock::now();
    lock.unlock();

    const bool again = strand->run_turn();

    lock.lock();
    self->strand.reset();  // not the last reference: `strand` holds one
    if (self->blocked) {
      self->blocked = false;
      --blocked_;
    }
    if (again && !stopping_) ready_.push_back(strand);  // round robin: to the back
    lock.unlock();
  }
  self->exited = true;
  --live_;
  exit_cv_.notify_all();
  if (!ready_.empty()) work_cv_.notify_one();  // leaving as surplus: hand the work on
  lock.unlock();
  tl_worker = nullptr;
  tl_pool = nullptr;
}

void ExecutorState::compensate_locked(SteadyClock::time_point now,
                                      std::vector<std::string>& newly_blocked, bool& cap_reached) {
  for (Worker& w : workers_) {
    if (w.strand && !w.blocked && now - w.started >= threshold_) {
      w.blocked = true;
      ++blocked_;
      newly_blocked.push_back(w.strand->name());
    }
  }
  // Start one replacement per waiting strand while fewer than threads_ workers are un-blocked,
  // keeping at most max_extra_ workers beyond threads_ alive at once.
  std::size_t started = 0;
  while (started < ready_.size() && unblocked_locked() < threads_) {
    const std::size_t extras_alive = live_ > threads_ ? live_ - threads_ : 0;
    if (extras_alive >= max_extra_) {
      cap_reached = !cap_logged_;
      cap_logged_ = true;
      return;
    }
    start_worker_locked();
    ++extra_started_;
    ++started;
  }
  if (live_ <= threads_) cap_logged_ = false;
}

void ExecutorState::run_monitor() {
  const auto tick = std::max(std::chrono::milliseconds(1), threshold_ / 2);
  std::unique_lock lock(mu_);
  while (!stopping_) {
    monitor_cv_.wait_for(lock, tick, [this] { return stopping_; });
    if (stopping_) break;
    std::vector<std::string> newly_blocked;
    bool cap_reached = false;
    std::string spawn_error;  // logged below, without mu_: the sink is user code
    try {
      compensate_locked(SteadyClock::now(), newly_blocked, cap_reached);
    } catch (const std::system_error& e) {
      spawn_error = e.what();
    }
    // Reap replacements that left: join them without mu_ (they no longer need it).
    std::list<Worker> exited;
    for (auto it = workers_.begin(); it != workers_.end();) {
      auto next = std::next(it);
      if (it->exited) exited.splice(exited.end(), workers_, it);
      it = next;
    }
    lock.unlock();
    if (!spawn_error.empty()) {
      log_.error("cannot start a replacement handler worker", {{"error", spawn_error}});
    }
    for (const std::string& name : newly_blocked) {
      log_.warn(
          "handler ran past the blocking threshold; its worker no longer counts against the pool",
          {{"handler", name}});
    }
    if (cap_reached) {
      log_.warn("handler executor at its cap of extra workers; ready handlers wait for a worker",
                {{"max_extra_threads", std::to_string(max_extra_)}});
    }
    for (Worker& w : exited) w.thread.join();
    exited.clear();
    lock.lock();
  }
  monitor_running_ = false;
}

void ExecutorState::shutdown(std::chrono::milliseconds timeout) {
  std::lock_guard shutdown_lock(shutdown_mu_);
  if (shut_down_) return;
  shut_down_ = true;
  std::deque<std::shared_ptr<StrandState>> dropped;  // released without mu_
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    dropped.swap(ready_);
  }
  work_cv_.notify_all();
  monitor_cv_.notify_all();
  if (monitor_.joinable()) monitor_.join();  // the monitor never runs user code, nor calls this
  dropped.clear();

  // From inside a drain() of this pool, our own worker cannot exit before we return.
  const void* own = tl_pool == this ? tl_worker : nullptr;
  std::list<Worker> finished;
  std::vector<std::string> stuck;
  {
    std::unique_lock lock(mu_);
    exit_cv_.wait_for(lock, timeout, [&] { return live_ == (own != nullptr ? 1u : 0u); });
    for (auto it = workers_.begin(); it != workers_.end();) {
      auto next = std::next(it);
      if (it->exited) {
        finished.splice(finished.end(), workers_, it);
      } else {
        // Still in a drain(): the thread holds the state and exits when the drain returns.
        if (&*it != own) stuck.push_back(it->strand ? it->strand->name() : std::string("?"));
        it->thread.detach();
      }
      it = next;
    }
  }
  for (const std::string& name : stuck) {
    log_.error(
        "handler did not return within the executor's shutdown timeout; detaching its worker",
        {{"handler", name}});
  }
  for (Worker& w : finished) w.thread.join();
}

std::size_t ExecutorState::thread_count() const {
  std::lock_guard lock(mu_);
  return live_ + (monitor_running_ ? 1 : 0);
}

std::size_t ExecutorState::blocked_workers() const {
  std::lock_guard lock(mu_);
  return blocked_;
}

std::uint64_t ExecutorState::extra_threads_started() const {
  std::lock_guard lock(mu_);
  return extra_started_;
}

}  // namespace detail

// ---- HandlerExecutor ------------------------------------------------------------------------

HandlerExecutor::HandlerExecutor(const HandlerExecutorOptions& options)
    : state_(std::make_shared<detail::ExecutorState>(options)) {
  try {
    state_->start();
  } catch (...) {
    state_->shutdown(kDefaultShutdownTimeout);
    throw;
  }
}

HandlerExecutor::~HandlerExecutor() { state_->shutdown(kDefaultShutdownTimeout); }

std::shared_ptr<HandlerExecutor::Strand> HandlerExecutor::make_strand(std::function<bool()> drain,
                                                                      std::string name) {
  return std::make_shared<Strand>(
      std::make_shared<detail::StrandState>(state_, std::move(drain), std::move(name)));
}

void HandlerExecutor::shutdown(std::chrono::milliseconds timeout) { state_->shutdown(timeout); }
std::size_t HandlerExecutor::thread_count() const { return state_->thread_count(); }
std::size_t HandlerExecutor::blocked_workers() const { return state_->blocked_workers(); }
std::uint64_t HandlerExecutor::extra_threads_started() const {
  return state_->extra_threads_started();
}
std::size_t HandlerExecutor::pool_size() const { return state_->pool_size(); }

// ---- Strand ---------------------------------------------------------------------------------

HandlerExecutor::Strand::Strand(std::shared_ptr<detail::StrandState> state)
    : state_(std::move(state)) {}
HandlerExecutor::Strand::~Strand() { state_->close(); }
void HandlerExecutor::Strand::wake() { state_->wake(state_); }

void HandlerExecutor::wake_all(std::span<Strand* const> strands) {
  // Reused by every call on this thread (a reflector); emptied before returning.
  thread_local std::vector<std::shared_ptr<detail::StrandState>> due;
  for (Strand* s : strands) {
    if (s->state_->mark_woken()) due.push_back(s->state_);
  }
  // One lock and one round of notifications per executor (in practice all are the factory's).
  std::size_t begin = 0;
  while (begin < due.size()) {
    detail::ExecutorState* executor = due[begin]->executor();
    std::size_t end = begin + 1;
    while (end < due.size() && due[end]->executor() == executor) ++end;
    executor->push_all(std::span(due.data() + begin, end - begin));
    begin = end;
  }
  due.clear();
}
void HandlerExecutor::Strand::close() { state_->close(); }
bool HandlerExecutor::Strand::wait_idle(std::chrono::milliseconds timeout) {
  return state_->wait_idle(timeout);
}
bool HandlerExecutor::Strand::running_here() const { return state_->running_here(); }
std::uint64_t HandlerExecutor::Strand::schedules() const { return state_->schedules(); }
const std::string& HandlerExecutor::Strand::name() const { return state_->name(); }

}  // namespace kinformer::informer
