#include "kinformer/controller/leader_election.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>

#include "kinformer/client/error.h"
#include "kinformer/controller/lease_lock.h"
#include "leader_election_metrics.h"

namespace kinformer::controller {
namespace detail {
namespace {

using Clock = informer::Clock;
using ClockPtr = informer::ClockPtr;
using Duration = Clock::Duration;
using TimePoint = Clock::TimePoint;

// client-go's JitterFactor for the acquire waits.
constexpr double kJitterFactor = 1.2;

void validate(const LeaderElectionOptions& o) {
  auto bad = [](const std::string& what) {
    throw client::ConfigError("LeaderElectionOptions: " + what);
  };
  if (o.lease_namespace.empty()) bad("lease_namespace is empty");
  if (o.lease_name.empty()) bad("lease_name is empty");
  if (o.identity.empty()) bad("identity is empty");
  if (!o.client && !o.lock) bad("client is null (and no lock given)");
  if (o.retry_period <= Duration::zero()) bad("retry_period must be positive");
  if (o.lease_duration < std::chrono::seconds(1) ||
      o.lease_duration % std::chrono::seconds(1) != std::chrono::milliseconds::zero()) {
    bad("lease_duration must be a whole number of seconds, at least 1 (the Lease stores "
        "leaseDurationSeconds)");
  }
  if (o.renew_deadline >= o.lease_duration) bad("renew_deadline must be below lease_duration");
  if (static_cast<double>(o.renew_deadline.count()) <=
      kJitterFactor * static_cast<double>(o.retry_period.count())) {
    bad("renew_deadline must exceed 1.2 x retry_period");
  }
}

MicroTime system_wall_clock() {
  return std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now());
}

}  // namespace

class ElectorState {
 public:
  explicit ElectorState(LeaderElectionOptions o)
      : lock_(o.lock
                  ? std::move(o.lock)
                  : std::make_unique<LeaseLock>(o.client, o.lease_namespace, o.lease_name, o.log)),
        identity_(std::move(o.identity)),
        lease_duration_(o.lease_duration),
        renew_deadline_(o.renew_deadline),
        retry_period_(o.retry_period),
        release_on_stop_(o.release_on_stop),
        watch_lease_(o.watch_lease),
        callbacks_(std::move(o.callbacks)),
        clock_(o.clock ? std::move(o.clock) : informer::system_clock()),
        wall_clock_(o.wall_clock ? std::move(o.wall_clock) : system_wall_clock),
        random_(o.random ? std::move(o.random) : informer::default_random()),
        log_(std::move(o.log), "leader-election",
             {{"lease", o.lease_namespace + "/" + o.lease_name}, {"identity", identity_}}),
        metrics_(std::move(o.registry), o.lease_name) {}

  void start() {
    std::lock_guard lock(lifecycle_mu_);
    if (started_) throw std::logic_error("LeaderElector::start: called twice");
    started_ = true;
    thread_ = std::jthread([this](const std::stop_token& stop) {
      elector_thread_ = std::this_thread::get_id();
      run(stop);
      elector_thread_ = std::thread::id();
    });
  }

  void stop() {
    const auto self = std::this_thread::get_id();
    if (self == elector_thread_.load() || self == work_thread_.load()) {
      // Joining would wait for this very callback to return.
      throw std::logic_error("LeaderElector::stop: called from a callback");
    }
    std::lock_guard lock(lifecycle_mu_);
    if (thread_.joinable()) {
      thread_.request_stop();
      thread_.join();
    }
  }

  [[nodiscard]] bool is_leader() const { return leading_.load(); }
  [[nodiscard]] std::string leader() const {
    std::lock_guard lock(mu_);
    return observed_.holder_identity;
  }

 private:
  enum class StepDown { stopped, renew_deadline, other_holder };

  void run(const std::stop_token& stop) {
    // Destroyed when run() returns: no notice comes after.
    RecordWatchPtr watch;
    if (watch_lease_) {
      watch = lock_->watch(
          [this](const std::optional<LeaderElectionRecord>& record) { notify(record); });
    }
    watching_ = watch != nullptr;
    while (!stop.stop_requested()) {
      TimePoint acquired_at;
      if (!acquire(stop, acquired_at)) return;
      const StepDown why = lead(stop, acquired_at);
      if (why == StepDown::stopped) {
        if (release_on_stop_) release();
        return;
      }
    }
  }

  // Tries until it holds the lock (true, with the start of the successful try) or stop is
  // requested (false): every jittered retry_period, and sooner as the notices of the lock's
  // watch say (wait_for_next_try).
  bool acquire(const std::stop_token& stop, TimePoint& acquired_at) {
    log_.info("campaigning");
    {
      // Notices that came while leading may predate what the first try reads.
      std::lock_guard lock(mu_);
      notice_.reset();
    }
    while (!stop.stop_requested()) {
      const TimePoint began = clock_->now();
      const bool ok = try_acquire_or_renew();
      report_transition();
      if (ok) {
        acquired_at = began;
        return true;
      }
      const double jitter = 1.0 + kJitterFactor * std::clamp(random_(), 0.0, 1.0);
      const auto wait =
          std::chrono::duration_cast<Duration>(std::chrono::duration<double, std::nano>(
              jitter *
              static_cast<double>(
                  std::chrono::duration_cast<std::chrono::nanoseconds>(retry_period_).count())));
      if (!wait_for_next_try(began, clock_->now() + wait, stop)) return false;
    }
    return false;
  }

  // Waits until the next try is due (true) or stop is requested (false). The try is due at
  // `retry_at` (the jittered retry), or, when the lock's watch runs, sooner:
  // - at once when a notice shows the lock released (no holder) or its object gone;
  // - when the lease observed now expires, unless it had expired by the try that began at
  //   `last_try` already (that try failed for another reason: a conflict, an error; retrying at
  //   once would spin).
  // Notices wake the sleep, and the time is worked out again from what they showed.
  bool wait_for_next_try(TimePoint last_try, TimePoint retry_at, const std::stop_token& stop) {
    while (!stop.stop_requested()) {
      if (take_notice()) return true;
      TimePoint due = retry_at;
      if (auto expiry = observed_expiry(); watching_ && expiry && *expiry > last_try) {
        due = std::min(due, *expiry);
      }
      const TimePoint now = clock_->now();
      if (now >= due) return true;
      if (!sleep_until_notified(due - now, stop)) return false;
    }
    return false;
  }

  // Sleeps for `d` on the clock, or until a notice comes or stop is requested. False on stop.
  bool sleep_until_notified(Duration d, const std::stop_token& stop) {
    std::stop_source wake;
    {
      std::lock_guard lock(mu_);
      if (notice_) return true;
      wake_ = wake;
    }
    {
      std::stop_callback forward(stop, [&wake] { wake.request_stop(); });
      clock_->sleep_for(d, wake.get_token());
    }
    std::lock_guard lock(mu_);
    wake_.reset();
    return !stop.stop_requested();
  }

  // The lock's watch: keeps the newest record (the time it came is when it was observed) and
  // wakes a candidate's sleep. The watch's thread.
  void notify(const std::optional<LeaderElectionRecord>& record) {
    std::lock_guard lock(mu_);
    notice_ = Notice{record, clock_->now()};
    if (wake_) wake_->request_stop();
  }

  // Observes the record of the newest notice, if any. True when it calls for a try at once: the
  // object is gone, or a change to no holder (released).
  bool take_notice() {
    std::optional<Notice> notice;
    {
      std::lock_guard lock(mu_);
      notice.swap(notice_);
    }
    if (!notice) return false;
    if (!notice->record) {
      log_.debug("the lease is gone: trying at once");
      return true;
    }
    if (observed_once_ && *notice->record == observed_) return false;
    observe(*notice->record, notice->at);
    report_transition();
    if (!observed_.holder_identity.empty()) return false;
    log_.debug("the lease was released: trying at once");
    return true;
  }

  // When the claim of the holder observed (another candidate) expires on this elector's clock.
  [[nodiscard]] std::optional<TimePoint> observed_expiry() const {
    if (!observed_once_ || observed_.holder_identity.empty() || observed_holder_is_me()) {
      return std::nullopt;
    }
    return observed_at_ + std::chrono::seconds(observed_.lease_duration_seconds);
  }

  // Leads until stop, a missed renew deadline or another holder; returns why, after stepping
  // down (the work stopped and returned, on_stopped_leading called).
  StepDown lead(const std::stop_token& stop, TimePoint acquired_at) {
    leading_ = true;
    metrics_.leading(true);
    log_.info("started leading");
    std::jthread work;
    if (callbacks_.on_started_leading) {
      work = std::jthread([this](const std::stop_token& work_stop) {
        work_thread_ = std::this_thread::get_id();
        try {
          callbacks_.on_started_leading(work_stop);
        } catch (const std::exception& e) {
          log_.error("on_started_leading threw", {{"error", e.what()}});
        } catch (...) {
          log_.error("on_started_leading threw", {{"error", "unknown exception"}});
        }
      });
    }
    TimePoint last_renewed = acquired_at;  // the start of the last successful try
    StepDown why = StepDown::stopped;
    while (true) {
      // The renewal must succeed within renew_deadline of the last success: never sleep past it.
      const TimePoint deadline = last_renewed + renew_deadline_;
      const Duration left = std::max(Duration::zero(), deadline - clock_->now());
      if (!clock_->sleep_for(std::min<Duration>(retry_period_, left), stop)) break;
      if (clock_->now() >= deadline) {
        why = StepDown::renew_deadline;
        break;
      }
      const TimePoint began = clock_->now();
      const bool ok = try_acquire_or_renew();
      report_transition();
      if (ok) {
        last_renewed = began;
      } else if (!observed_holder_is_me()) {
        why = StepDown::other_holder;
        break;
      }
    }
    leading_ = false;
    metrics_.leading(false);
    switch (why) {
      case StepDown::stopped:
        log_.info("stopping: stepping down");
        break;
      case StepDown::renew_deadline:
        log_.warn("failed to renew the lease within the renew deadline: stepping down");
        break;
      case StepDown::other_holder:
        log_.warn("the lease has another holder: stepping down", {{"holder", leader()}});
        break;
    }
    if (work.joinable()) {
      work.request_stop();
      work.join();
      work_thread_ = std::thread::id();
    }
    call("on_stopped_leading", [&] {
      if (callbacks_.on_stopped_leading) callbacks_.on_stopped_leading();
    });
    log_.info("stopped leading");
    return why;
  }

  // client-go's tryAcquireOrRenew: true when this elector holds the lock afterwards.
  bool try_acquire_or_renew() {
    const MicroTime wall = wall_clock_();
    LeaderElectionRecord desired;
    desired.holder_identity = identity_;
    desired.lease_duration_seconds =
        static_cast<int>(std::chrono::duration_cast<std::chrono::seconds>(lease_duration_).count());
    desired.acquire_time = wall;
    desired.renew_time = wall;

    // The leader writes over the record it wrote last, without reading it first; a conflict
    // (another wrote since) falls back to reading it.
    if (observed_holder_is_me() && lease_valid()) {
      desired.acquire_time = observed_.acquire_time;
      desired.leader_transitions = observed_.leader_transitions;
      auto s = lock_->update(desired);
      if (s) {
        observe(desired);
        return true;
      }
      log_.debug("renewing without a read failed: reading the lease",
                 {{"error", s.error().to_string()}});
    }

    auto got = lock_->get();
    if (!got) {
      if (!is_not_found(got.error())) {
        log_.warn("failed to read the lease", {{"error", got.error().to_string()}});
        return false;
      }
      if (auto s = lock_->create(desired); !s) {
        if (is_conflict(s.error())) {
          log_.info("another candidate created the lease first");
        } else {
          log_.warn("failed to create the lease", {{"error", s.error().to_string()}});
        }
        return false;
      }
      observe(desired);
      return true;
    }

    // Expiry counts from when this elector saw the record change, never from its renewTime.
    if (!observed_once_ || *got != observed_) observe(*got);
    if (!observed_.holder_identity.empty() && lease_valid() && !observed_holder_is_me()) {
      return false;
    }

    if (observed_holder_is_me()) {
      desired.acquire_time = observed_.acquire_time;
      desired.leader_transitions = observed_.leader_transitions;
      metrics_.slowpath();
    } else {
      desired.leader_transitions = observed_.leader_transitions + 1;
    }
    if (auto s = lock_->update(desired); !s) {
      if (is_conflict(s.error())) {
        log_.info("another candidate wrote the lease first", {{"error", s.error().to_string()}});
      } else {
        log_.warn("failed to update the lease", {{"error", s.error().to_string()}});
      }
      return false;
    }
    observe(desired);
    return true;
  }

  // client-go's release: no holder, a lease of one second.
  void release() {
    if (!observed_holder_is_me()) return;
    const MicroTime wall = wall_clock_();
    LeaderElectionRecord released;
    released.lease_duration_seconds = 1;
    released.acquire_time = wall;
    released.renew_time = wall;
    released.leader_transitions = observed_.leader_transitions;
    if (auto s = lock_->update(released); !s) {
      log_.warn("failed to release the lease", {{"error", s.error().to_string()}});
      return;
    }
    observe(released);
    log_.info("released the lease");
  }

  // Notes `record` as seen changed at `at` (now by default). The time never moves back: a notice
  // taken late may carry an earlier time than a read that saw a newer record meanwhile.
  void observe(const LeaderElectionRecord& record, std::optional<TimePoint> at = std::nullopt) {
    {
      std::lock_guard lock(mu_);
      observed_ = record;
    }
    observed_at_ = observed_once_ ? std::max(observed_at_, at.value_or(clock_->now()))
                                  : at.value_or(clock_->now());
    observed_once_ = true;
  }

  // The holder's claim lasts its leaseDurationSeconds from when this elector observed it.
  [[nodiscard]] bool lease_valid() const {
    return observed_at_ + std::chrono::seconds(observed_.lease_duration_seconds) > clock_->now();
  }

  [[nodiscard]] bool observed_holder_is_me() const {
    return observed_once_ && observed_.holder_identity == identity_;
  }

  void report_transition() {
    if (observed_.holder_identity == reported_) return;
    reported_ = observed_.holder_identity;
    log_.info("new leader observed", {{"holder", reported_}});
    call("on_new_leader", [&] {
      if (callbacks_.on_new_leader) callbacks_.on_new_leader(reported_);
    });
  }

  template <typename F>
  void call(const char* name, F&& f) {
    try {
      f();
    } catch (const std::exception& e) {
      log_.error("callback threw", {{"callback", name}, {"error", e.what()}});
    } catch (...) {
      log_.error("callback threw", {{"callback", name}, {"error", "unknown exception"}});
    }
  }

  const ResourceLockPtr lock_;  // used by the elector's thread only
  const std::string identity_;
  const Duration lease_duration_;
  const Duration renew_deadline_;
  const Duration retry_period_;
  const bool release_on_stop_;
  const bool watch_lease_;
  const LeaderCallbacks callbacks_;
  const ClockPtr clock_;
  const std::function<MicroTime()> wall_clock_;
  const informer::RandomSource random_;
  const client::Logger log_;
  LeaderElectionMetrics metrics_;

  mutable std::mutex mu_;
  // Written by the elector's thread only (it reads it without mu_); guarded by mu_ for leader().
  LeaderElectionRecord observed_;
  // The elector's thread only.
  bool observed_once_ = false;
  TimePoint observed_at_{};
  std::string reported_;
  // The lock's watch runs: without one, the tries are client-go's, every jittered retry_period.
  bool watching_ = false;

  // What the lock's watch told last (nullopt record: the object is gone), and when, on clock_.
  struct Notice {
    std::optional<LeaderElectionRecord> record;
    TimePoint at;
  };
  std::optional<Notice> notice_;          // guarded by mu_
  std::optional<std::stop_source> wake_;  // guarded by mu_: a candidate's sleep, while it sleeps

  std::atomic<bool> leading_{false};
  // The threads that run callbacks, so that stop() from one of them fails instead of hanging.
  std::atomic<std::thread::id> elector_thread_{};
  std::atomic<std::thread::id> work_thread_{};

  std::mutex lifecycle_mu_;
  bool started_ = false;  // guarded by lifecycle_mu_
  std::jthread thread_;   // guarded by lifecycle_mu_
};

}  // namespace detail

LeaderElector::LeaderElector(LeaderElectionOptions options) : identity_(options.identity) {
  detail::validate(options);
  state_ = std::make_unique<detail::ElectorState>(std::move(options));
}

LeaderElector::~LeaderElector() {
  try {
    stop();
  } catch (...) {
    // Destroyed from one of its own callbacks: no thread could ever join the one running it.
    std::terminate();
  }
}

void LeaderElector::start() { state_->start(); }
void LeaderElector::stop() { state_->stop(); }
bool LeaderElector::is_leader() const { return state_->is_leader(); }
std::string LeaderElector::leader() const { return state_->leader(); }

}  // namespace kinformer::controller
