// LeaderElector against Leases served over HTTP by the scripted FakeApiServer (a real RestClient
// and LeaseLock), each candidate on a StepClock of its own: every step is one try.
#include "kinformer/controller/leader_election.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "fake_apiserver.h"
#include "fake_leases.h"
#include "kinformer/client/error.h"
#include "kinformer/controller/controller.h"
#include "kinformer/prometheus/prometheus_registry.h"
#include "log_capture.h"
#include "metric_value.h"
#include "step_clock.h"
#include "test_env.h"

namespace kinformer::testing {
namespace {

using namespace std::chrono_literals;
using controller::LeaderElectionOptions;
using controller::LeaderElector;
using controller::MicroTime;

constexpr const char* kNs = "kube-system";
constexpr const char* kName = "my-controller";
// The wall clock every candidate writes into the Lease (informational only).
const MicroTime kWallStart{std::chrono::seconds(1'700'000'000)};

std::shared_ptr<client::RestClient> make_client(const FakeApiServer& server) {
  client::RestClientOptions o;
  o.rate_limit.qps = 0;  // no client-side limit: the tests count the elector's own waits
  return std::make_shared<client::RestClient>(server.cluster_config(), o);
}

/// The lock's watch as the test drives it: notify() calls the elector's RecordChanged on the
/// test's thread, while a watch is open.
class ScriptedNotices {
 public:
  void notify(const std::optional<controller::LeaderElectionRecord>& record) {
    std::lock_guard l(mu_);
    if (changed_) changed_(record);
  }
  [[nodiscard]] bool watched() const {
    std::lock_guard l(mu_);
    return static_cast<bool>(changed_);
  }

 private:
  friend class NotifyingLock;
  mutable std::mutex mu_;
  controller::RecordChanged changed_;  // guarded by mu_
};

/// A LeaseLock over the scripted server whose watch is ScriptedNotices; with `can_watch` false,
/// watch() returns null, as a lock without one does (the elector then polls).
class NotifyingLock final : public controller::ResourceLock {
 public:
  NotifyingLock(const FakeApiServer& server, std::shared_ptr<ScriptedNotices> notices,
                bool can_watch)
      : lease_(make_client(server), kNs, kName),
        notices_(std::move(notices)),
        can_watch_(can_watch) {}

  client::Result<controller::LeaderElectionRecord> get() override { return lease_.get(); }
  client::Status create(const controller::LeaderElectionRecord& r) override {
    return lease_.create(r);
  }
  client::Status update(const controller::LeaderElectionRecord& r) override {
    return lease_.update(r);
  }
  [[nodiscard]] std::string describe() const override { return lease_.describe(); }
  controller::RecordWatchPtr watch(controller::RecordChanged changed) override {
    if (!can_watch_) return nullptr;
    class Watch final : public controller::RecordWatch {
     public:
      explicit Watch(std::shared_ptr<ScriptedNotices> n) : n_(std::move(n)) {}
      ~Watch() override {
        std::lock_guard l(n_->mu_);
        n_->changed_ = nullptr;
      }
      Watch(const Watch&) = delete;
      Watch& operator=(const Watch&) = delete;

     private:
      std::shared_ptr<ScriptedNotices> n_;
    };
    {
      std::lock_guard l(notices_->mu_);
      notices_->changed_ = std::move(changed);
    }
    return std::make_unique<Watch>(notices_);
  }

 private:
  controller::LeaseLock lease_;
  std::shared_ptr<ScriptedNotices> notices_;
  bool can_watch_;
};

/// One candidate: an elector on its own StepClock, recording what its callbacks saw. Without
/// `lock`, a LeaseLock and no watch: it learns of changes only at its tries (client-go's way).
class Candidate {
 public:
  Candidate(const FakeApiServer& server, std::string identity, bool release_on_stop = false,
            FakeLeases* leases = nullptr, controller::ResourceLockPtr lock = nullptr)
      : leases_(leases) {
    LeaderElectionOptions o;
    o.lease_namespace = kNs;
    o.lease_name = kName;
    o.identity = std::move(identity);
    o.client = make_client(server);
    o.release_on_stop = release_on_stop;
    o.watch_lease = lock != nullptr;
    o.lock = std::move(lock);
    o.clock = clock;
    o.wall_clock = [c = clock] { return wall(*c); };
    o.random = [] { return 0.0; };
    o.log = logs.sink();
    o.callbacks.on_started_leading = [this](std::stop_token stop) {
      record("work started");
      std::mutex m;
      std::condition_variable_any cv;
      std::unique_lock lock(m);
      cv.wait(lock, stop, [] { return false; });
      if (leases_) {
        auto r = leases_->record(kNs, kName);
        std::lock_guard l(mu_);
        holder_when_work_stopped_ = r ? r->holder_identity : "<none>";
      }
      record("work stopped");
    };
    o.callbacks.on_stopped_leading = [this] {
      {
        std::lock_guard l(mu_);
        stopped_at_ = clock->now();
      }
      record("stopped leading");
    };
    o.callbacks.on_new_leader = [this](const std::string& id) {
      std::lock_guard l(mu_);
      new_leaders_.push_back(id);
    };
    elector = std::make_unique<LeaderElector>(std::move(o));
  }

  // The elector first: its callbacks use the members below.
  ~Candidate() { elector.reset(); }
  Candidate(const Candidate&) = delete;
  Candidate& operator=(const Candidate&) = delete;

  static MicroTime wall(const StepClock& c) {
    return kWallStart + std::chrono::duration_cast<std::chrono::microseconds>(
                            c.now().time_since_epoch() - std::chrono::hours(1000));
  }

  /// Starts the elector and waits until its first try is done (it sleeps).
  void start() {
    elector->start();
    ASSERT_TRUE(clock->wait_sleeping());
  }

  std::vector<std::string> events() const {
    std::lock_guard l(mu_);
    return events_;
  }
  std::vector<std::string> new_leaders() const {
    std::lock_guard l(mu_);
    return new_leaders_;
  }
  informer::Clock::TimePoint stopped_at() const {
    std::lock_guard l(mu_);
    return stopped_at_;
  }
  std::string holder_when_work_stopped() const {
    std::lock_guard l(mu_);
    return holder_when_work_stopped_;
  }
  /// The clock's time since it started.
  std::chrono::seconds elapsed() const {
    return std::chrono::duration_cast<std::chrono::seconds>(elapsed_ms());
  }
  std::chrono::milliseconds elapsed_ms() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(clock->now().time_since_epoch() -
                                                                 std::chrono::hours(1000));
  }

  std::shared_ptr<StepClock> clock = std::make_shared<StepClock>();
  LogCapture logs;
  std::unique_ptr<LeaderElector> elector;

 private:
  void record(std::string e) {
    std::lock_guard l(mu_);
    events_.push_back(std::move(e));
  }

  FakeLeases* leases_;
  mutable std::mutex mu_;
  std::vector<std::string> events_;
  std::vector<std::string> new_leaders_;
  informer::Clock::TimePoint stopped_at_{};
  std::string holder_when_work_stopped_;
};

/// A spec held by `holder`, renewed at `renew` (RFC 3339).
std::string held_spec(const std::string& holder, const std::string& renew, int transitions = 3) {
  return R"({"holderIdentity":")" + holder + R"(","leaseDurationSeconds":15,"acquireTime":")" +
         renew + R"(","renewTime":")" + renew + R"(","leaseTransitions":)" +
         std::to_string(transitions) + "}";
}

std::string wall_text(std::chrono::seconds offset) {
  return controller::format_micro_time(kWallStart + offset);
}

TEST(LeaderElectorTest, AcquiresAnAbsentLeaseByCreatingIt) {
  FakeApiServer server;
  FakeLeases leases(server);
  Candidate a(server, "a");
  a.start();

  EXPECT_TRUE(a.elector->is_leader());
  EXPECT_EQ(a.elector->leader(), "a");
  auto record = leases.record(kNs, kName);
  ASSERT_TRUE(record);
  EXPECT_EQ(record->holder_identity, "a");
  EXPECT_EQ(record->lease_duration_seconds, 15);
  EXPECT_EQ(record->leader_transitions, 0);
  EXPECT_EQ(record->renew_time, kWallStart);
  ASSERT_TRUE(eventually([&] { return a.events() == std::vector<std::string>{"work started"}; }));
  EXPECT_EQ(a.new_leaders(), std::vector<std::string>{"a"});
  bool posted = false;
  for (const auto& r : server.requests()) posted = posted || r.method == "POST";
  EXPECT_TRUE(posted);
  // The log lines name the lease and the candidate.
  auto started = a.logs.with_message("started leading");
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].component, "leader-election");
  EXPECT_EQ(started[0].field("lease"), "kube-system/my-controller");
  EXPECT_EQ(started[0].field("identity"), "a");
}

TEST(LeaderElectorTest, RenewingKeepsLeadingEveryRetryPeriod) {
  FakeApiServer server;
  FakeLeases leases(server);
  Candidate a(server, "a");
  a.start();
  for (int i = 1; i <= 8; ++i) {
    ASSERT_TRUE(a.clock->step());
    EXPECT_TRUE(a.elector->is_leader()) << "renewal " << i;
    auto record = leases.record(kNs, kName);
    ASSERT_TRUE(record);
    EXPECT_EQ(record->holder_identity, "a");
    EXPECT_EQ(record->renew_time, kWallStart + std::chrono::seconds(2 * i));
    EXPECT_EQ(record->acquire_time, kWallStart);  // kept across renewals
    EXPECT_EQ(record->leader_transitions, 0);
  }
  // The work runs on a thread of its own: it has started by now or soon.
  EXPECT_TRUE(eventually([&] { return a.events() == std::vector<std::string>{"work started"}; }));
  for (auto w : a.clock->waits()) EXPECT_EQ(w, 2s);
  // A leader renews without reading the Lease first.
  std::size_t gets = 0;
  for (const auto& r : server.requests()) gets += r.method == "GET" ? 1 : 0;
  EXPECT_EQ(gets, 1u);  // the first try's, which found none
}

// Expiry counts from when this candidate saw the record change, whatever the holder's renewTime
// says: minutes in the past, the present, or minutes in the future.
class ExpiryTest : public ::testing::TestWithParam<int> {};

TEST_P(ExpiryTest, AnUnchangedLeaseIsTakenOverALeaseDurationAfterItWasFirstSeen) {
  FakeApiServer server;
  FakeLeases leases(server);
  const auto skew = std::chrono::minutes(GetParam());
  leases.put(kNs, kName, held_spec("other", wall_text(skew)));
  Candidate b(server, "b");
  b.start();  // the first try sees "other" at 0 s
  EXPECT_FALSE(b.elector->is_leader());
  EXPECT_EQ(b.elector->leader(), "other");
  // Tries at 2, 4, ... 14 s: the lease (15 s from 0 s) is still valid.
  for (int t = 2; t <= 14; t += 2) {
    ASSERT_TRUE(b.clock->step());
    EXPECT_FALSE(b.elector->is_leader()) << "at " << t << " s";
    EXPECT_EQ(b.elector->leader(), "other");
  }
  ASSERT_TRUE(b.clock->step());  // 16 s: expired
  EXPECT_EQ(b.elapsed(), 16s);
  EXPECT_TRUE(b.elector->is_leader());
  auto record = leases.record(kNs, kName);
  ASSERT_TRUE(record);
  EXPECT_EQ(record->holder_identity, "b");
  EXPECT_EQ(record->leader_transitions, 4);
  EXPECT_EQ(b.new_leaders(), (std::vector<std::string>{"other", "b"}));
}

INSTANTIATE_TEST_SUITE_P(RenewTimeSkew, ExpiryTest, ::testing::Values(-10, 0, 10),
                         [](const auto& info) {
                           return info.param < 0   ? std::string("Past")
                                  : info.param > 0 ? std::string("Future")
                                                   : std::string("Now");
                         });

TEST(LeaderElectorTest, ARenewalSeenStartsTheLeaseDurationOver) {
  FakeApiServer server;
  FakeLeases leases(server);
  leases.put(kNs, kName, held_spec("other", wall_text(0s)));
  Candidate b(server, "b");
  b.start();  // seen at 0 s
  for (int t = 2; t <= 10; t += 2) ASSERT_TRUE(b.clock->step());
  leases.put(kNs, kName, held_spec("other", wall_text(-1h)));  // renewed (a skewed clock)
  for (int t = 12; t <= 24; t += 2) {  // seen changed at 12 s: valid until 27 s
    ASSERT_TRUE(b.clock->step());
    EXPECT_FALSE(b.elector->is_leader()) << "at " << t << " s";
  }
  ASSERT_TRUE(b.clock->step());  // 26 s
  EXPECT_FALSE(b.elector->is_leader());
  ASSERT_TRUE(b.clock->step());  // 28 s
  EXPECT_TRUE(b.elector->is_leader());
}

TEST(LeaderElectorTest, AConflictOnUpdateIsNotLeadership) {
  FakeApiServer server;
  FakeLeases leases(server);
  // A released Lease: anyone may take it at once.
  leases.put(kNs, kName, R"({"holderIdentity":"","leaseDurationSeconds":1,"leaseTransitions":2})");
  std::atomic<int> conflicts{0};
  leases.set_fault([&](const Request& r) -> std::optional<Reply> {
    // Another candidate writes between our read and our update: the update's resourceVersion
    // is stale.
    if (r.method == "PUT" && conflicts++ == 0)
      leases.put(kNs, kName, held_spec("c", "2024-01-01T00:00:00Z", 3));
    return std::nullopt;
  });
  Candidate b(server, "b");
  b.start();
  EXPECT_EQ(conflicts.load(), 1);
  EXPECT_FALSE(b.elector->is_leader());
  ASSERT_TRUE(b.clock->step());  // reads "c": held and valid
  EXPECT_FALSE(b.elector->is_leader());
  EXPECT_EQ(b.elector->leader(), "c");
  EXPECT_TRUE(b.events().empty());
  EXPECT_EQ(leases.record(kNs, kName)->holder_identity, "c");
  EXPECT_EQ(b.logs.with_message("another candidate wrote the lease first").size(), 1u);
}

TEST(LeaderElectorTest, ARenewFailingUntilTheRenewDeadlineStepsDownAfterStoppingTheWork) {
  FakeApiServer server;
  FakeLeases leases(server);
  Candidate a(server, "a");
  a.start();                     // leads from 0 s
  ASSERT_TRUE(a.clock->step());  // 2 s: renewed
  ASSERT_TRUE(a.clock->step());  // 4 s: renewed, the last success
  ASSERT_EQ(leases.record(kNs, kName)->renew_time, kWallStart + 4s);
  leases.set_fault([](const Request&) -> std::optional<Reply> {
    return Reply::api_status(500, "InternalError", "etcd is down");
  });
  for (int t = 6; t <= 12; t += 2) {
    ASSERT_TRUE(a.clock->step());
    EXPECT_TRUE(a.elector->is_leader()) << "at " << t << " s: within the renew deadline";
  }
  ASSERT_TRUE(eventually([&] { return a.events().size() == 1; }));
  ASSERT_TRUE(a.clock->step());  // 14 s: 10 s since the last success began
  EXPECT_FALSE(a.elector->is_leader());
  EXPECT_EQ(a.events(),
            (std::vector<std::string>{"work started", "work stopped", "stopped leading"}));
  EXPECT_EQ(a.stopped_at().time_since_epoch() - std::chrono::hours(1000), 14s);
  // Stepped down before the others may take over (15 s after they saw the 4 s renewal).
  EXPECT_EQ(
      a.logs.with_message("failed to renew the lease within the renew deadline: stepping down")
          .size(),
      1u);
  // It campaigns again: once the server is back, it leads again.
  leases.set_fault(nullptr);
  ASSERT_TRUE(a.clock->step());
  EXPECT_TRUE(a.elector->is_leader());
  ASSERT_TRUE(eventually([&] { return a.events().size() == 4; }));
  EXPECT_EQ(a.events().back(), "work started");
}

TEST(LeaderElectorTest, OnNewLeaderSeesEachHolderAndALeaderStepsDownWhenAnotherHoldsTheLease) {
  FakeApiServer server;
  FakeLeases leases(server);
  leases.put(kNs, kName, held_spec("other", wall_text(0s)));
  Candidate b(server, "b");
  b.start();
  EXPECT_EQ(b.new_leaders(), std::vector<std::string>{"other"});
  // "other" releases; b takes it at its next try.
  leases.put(kNs, kName, R"({"holderIdentity":"","leaseDurationSeconds":1,"leaseTransitions":3})");
  ASSERT_TRUE(b.clock->step());
  EXPECT_TRUE(b.elector->is_leader());
  EXPECT_EQ(b.new_leaders(), (std::vector<std::string>{"other", "b"}));
  // Someone overwrites the Lease (e.g. an operator): b's renewal conflicts, its read shows "c".
  leases.put(kNs, kName, held_spec("c", wall_text(0s), 5));
  ASSERT_TRUE(b.clock->step());
  EXPECT_FALSE(b.elector->is_leader());
  EXPECT_EQ(b.elector->leader(), "c");
  EXPECT_EQ(b.new_leaders(), (std::vector<std::string>{"other", "b", "c"}));
  EXPECT_EQ(b.events(),
            (std::vector<std::string>{"work started", "work stopped", "stopped leading"}));
  EXPECT_EQ(leases.record(kNs, kName)->holder_identity, "c");
}

TEST(LeaderElectorTest, ReleaseOnStopLetsAnotherCandidateAcquireAtItsNextTry) {
  FakeApiServer server;
  FakeLeases leases(server);
  Candidate a(server, "a", /*release_on_stop=*/true, &leases);
  a.start();
  ASSERT_TRUE(a.elector->is_leader());
  Candidate b(server, "b");
  b.start();
  ASSERT_TRUE(b.clock->step());
  EXPECT_FALSE(b.elector->is_leader());
  EXPECT_EQ(b.elector->leader(), "a");

  a.elector->stop();
  EXPECT_FALSE(a.elector->is_leader());
  EXPECT_EQ(a.events(),
            (std::vector<std::string>{"work started", "work stopped", "stopped leading"}));
  // The release came after the work returned.
  EXPECT_EQ(a.holder_when_work_stopped(), "a");
  auto released = leases.record(kNs, kName);
  ASSERT_TRUE(released);
  EXPECT_EQ(released->holder_identity, "");
  EXPECT_EQ(released->lease_duration_seconds, 1);
  EXPECT_EQ(released->leader_transitions, 0);

  ASSERT_TRUE(b.clock->step());  // b's next try, 2 s after its last one
  EXPECT_TRUE(b.elector->is_leader());
  EXPECT_EQ(leases.record(kNs, kName)->holder_identity, "b");
  EXPECT_EQ(leases.record(kNs, kName)->leader_transitions, 1);
  EXPECT_EQ(leases.writers().back(), "b");
}

TEST(LeaderElectorTest, StopWithoutReleaseLeavesTheLeaseToExpire) {
  FakeApiServer server;
  FakeLeases leases(server);
  Candidate a(server, "a");
  a.start();
  Candidate b(server, "b");
  b.start();  // sees a's record at 0 s
  a.elector->stop();
  EXPECT_EQ(a.events(),
            (std::vector<std::string>{"work started", "work stopped", "stopped leading"}));
  EXPECT_EQ(leases.record(kNs, kName)->holder_identity, "a");
  for (int t = 2; t <= 14; t += 2) {
    ASSERT_TRUE(b.clock->step());
    EXPECT_FALSE(b.elector->is_leader()) << "at " << t << " s";
  }
  ASSERT_TRUE(b.clock->step());  // 16 s
  EXPECT_TRUE(b.elector->is_leader());
}

TEST(LeaderElectorTest, AControllerRunsOnlyWhileLeadingAndAgainInTheNextTerm) {
  FakeApiServer server;
  FakeLeases leases(server);
  Env env;
  env.fake->add_list({make_object("ns", "a", "1")}, "10");
  env.fake->add_watch();
  auto& inf = env.factory->informer(test_type());
  env.factory->start();
  std::atomic<int> reconciles{0};
  std::atomic<bool> running{false};
  std::atomic<bool> running_when_stopped{true};
  auto clock = std::make_shared<StepClock>();
  LeaderElectionOptions o;
  o.lease_namespace = kNs;
  o.lease_name = kName;
  o.identity = "a";
  o.client = make_client(server);
  o.watch_lease = false;
  o.clock = clock;
  o.random = [] { return 0.0; };
  o.log = [](const client::LogRecord&) {};
  o.callbacks.on_started_leading = [&](std::stop_token stop) {
    controller::ControllerOptions co;
    co.name = "term";
    co.reconcile = [&](const std::string&) -> client::Status {
      ++reconciles;
      return client::Ok{};
    };
    co.clock = std::make_shared<ManualClock>(500ms);
    co.log = [](const client::LogRecord&) {};
    controller::Controller c(std::move(co));
    c.watch(inf);
    running = true;
    c.run(stop);
    running = false;
  };
  o.callbacks.on_stopped_leading = [&] { running_when_stopped = running.load(); };
  LeaderElector a(std::move(o));
  a.start();
  ASSERT_TRUE(clock->wait_sleeping());
  ASSERT_TRUE(eventually([&] { return reconciles.load() == 1; }));
  leases.set_fault([](const Request&) -> std::optional<Reply> {
    return Reply::api_status(500, "InternalError", "etcd is down");
  });
  for (int i = 0; i < 10 && a.is_leader(); ++i) ASSERT_TRUE(clock->step());
  ASSERT_FALSE(a.is_leader());
  EXPECT_FALSE(running_when_stopped.load());  // the controller had drained and returned
  EXPECT_EQ(inf.handler_count(), 0u);
  leases.set_fault(nullptr);
  ASSERT_TRUE(clock->step());
  ASSERT_TRUE(a.is_leader());
  ASSERT_TRUE(eventually([&] { return reconciles.load() == 2; }));  // a new term reconciles all
  a.stop();
  EXPECT_FALSE(running.load());
}

TEST(LeaderElectorTest, StopWhileCampaigningCallsNoLeadershipCallback) {
  FakeApiServer server;
  FakeLeases leases(server);
  leases.put(kNs, kName, held_spec("other", wall_text(0s)));
  Candidate b(server, "b", /*release_on_stop=*/true);
  b.start();
  b.elector->stop();
  b.elector->stop();  // idempotent
  EXPECT_TRUE(b.events().empty());
  EXPECT_EQ(leases.record(kNs, kName)->holder_identity, "other");  // not released by b
  EXPECT_THROW(b.elector->start(), std::logic_error);
}

TEST(LeaderElectorTest, StopFromACallbackThrowsInsteadOfWaitingForItself) {
  FakeApiServer server;
  FakeLeases leases(server);
  auto clock = std::make_shared<StepClock>();
  std::unique_ptr<LeaderElector> elector;
  std::atomic<int> from_new_leader{0};
  std::atomic<int> from_work{0};
  LeaderElectionOptions o;
  o.lease_namespace = kNs;
  o.lease_name = kName;
  o.identity = "a";
  o.client = make_client(server);
  o.watch_lease = false;
  o.clock = clock;
  o.log = [](const client::LogRecord&) {};
  o.callbacks.on_new_leader = [&](const std::string&) {
    try {
      elector->stop();
    } catch (const std::logic_error&) {
      ++from_new_leader;
    }
  };
  o.callbacks.on_started_leading = [&](const std::stop_token&) {
    try {
      elector->stop();
    } catch (const std::logic_error&) {
      ++from_work;
    }
  };
  elector = std::make_unique<LeaderElector>(std::move(o));
  elector->start();
  ASSERT_TRUE(clock->wait_sleeping());
  ASSERT_TRUE(eventually([&] { return from_work.load() == 1; }));
  EXPECT_EQ(from_new_leader.load(), 1);
  elector->stop();
}

TEST(LeaderElectorTest, MetricsSayWhetherItLeadsAndCountRenewalsThatReadTheLease) {
  FakeApiServer server;
  FakeLeases leases(server);
  auto metrics = std::make_shared<prom::PrometheusRegistry>();
  auto registry = metrics->registry_ptr();
  auto clock = std::make_shared<StepClock>();
  auto options = [&](const std::string& id) {
    LeaderElectionOptions o;
    o.lease_namespace = kNs;
    o.lease_name = kName;
    o.identity = id;
    o.client = make_client(server);
    o.watch_lease = false;
    o.clock = clock;
    o.random = [] { return 0.0; };
    o.log = [](const client::LogRecord&) {};
    o.registry = metrics;
    return o;
  };
  const std::map<std::string, std::string> name{{"name", kName}};
  LeaderElector a(options("a"));
  EXPECT_EQ(metric(*registry, "leader_election_master_status", name), 0);
  // One series, one owner: a second elector of the lease on the registry is refused.
  EXPECT_THROW(LeaderElector(options("b")), client::ConfigError);
  a.start();
  ASSERT_TRUE(clock->wait_sleeping());
  EXPECT_EQ(metric(*registry, "leader_election_master_status", name), 1);
  ASSERT_TRUE(clock->step());  // renewed without reading
  EXPECT_EQ(metric(*registry, "leader_election_slowpath_total", name), 0);
  // Another write (still naming a): the renewal conflicts, reads the Lease, and renews.
  leases.put(kNs, kName, held_spec("a", wall_text(0s), 0));
  ASSERT_TRUE(clock->step());
  EXPECT_TRUE(a.is_leader());
  EXPECT_EQ(metric(*registry, "leader_election_slowpath_total", name), 1);
  a.stop();
  EXPECT_EQ(metric(*registry, "leader_election_master_status", name), 0);
}

TEST(LeaderElectorTest, AcquireWaitsAreJitteredUpToOnePointTwoRetryPeriods) {
  FakeApiServer server;
  FakeLeases leases(server);
  leases.put(kNs, kName, held_spec("other", wall_text(0s)));
  auto clock = std::make_shared<StepClock>();
  LeaderElectionOptions o;
  o.lease_namespace = kNs;
  o.lease_name = kName;
  o.identity = "b";
  o.client = make_client(server);
  o.watch_lease = false;
  o.clock = clock;
  o.random = [] { return 0.5; };
  o.log = [](const client::LogRecord&) {};
  LeaderElector b(std::move(o));
  b.start();
  ASSERT_TRUE(clock->wait_sleeping());
  ASSERT_EQ(clock->waits().size(), 1u);
  EXPECT_EQ(clock->waits()[0], 3200ms);  // 2 s * (1 + 1.2 * 0.5)
}

// A candidate told of each change by the lock's watch counts the lease duration from the notice
// and tries when that lease expires; without a watch it polls as client-go does and sees the
// renewal at its next read.
class NoticeTest : public ::testing::TestWithParam<bool> {};

TEST_P(NoticeTest, ANotifiedRenewalCountsFromTheNoticeAndTheTryIsAtTheObservedExpiry) {
  const bool watched = GetParam();
  FakeApiServer server;
  FakeLeases leases(server);
  leases.put(kNs, kName, held_spec("other", wall_text(0s)));
  auto notices = std::make_shared<ScriptedNotices>();
  Candidate b(server, "b", false, nullptr,
              std::make_unique<NotifyingLock>(server, notices, watched));
  b.start();  // its first try sees "other" at 0 s; the next is due at 2 s
  EXPECT_EQ(notices->watched(), watched);
  // "other" renews at 1.5 s; the watch tells at once.
  b.clock->advance(1500ms);
  leases.put(kNs, kName, held_spec("other", wall_text(1s)));
  notices->notify(leases.record(kNs, kName));
  if (watched) {
    ASSERT_TRUE(b.clock->wait_sleeps(2));  // woken, it sleeps on until its retry at 2 s
    EXPECT_EQ(b.clock->waits()[1], 500ms);
  }
  // Tries at 2, 4, ... 16 s: the lease (15 s from 1.5 s with the notice, else from its read at
  // 2 s) is valid at each.
  for (int t = 2; t <= 16; t += 2) {
    ASSERT_TRUE(b.clock->step());
    EXPECT_FALSE(b.elector->is_leader()) << "at " << t << " s";
  }
  ASSERT_TRUE(b.clock->step());
  EXPECT_TRUE(b.elector->is_leader());
  // With the notice: at 16.5 s, when the lease it observed expired, not at the retry (18 s).
  EXPECT_EQ(b.elapsed_ms(), watched ? 16500ms : 18000ms);
  EXPECT_EQ(leases.record(kNs, kName)->holder_identity, "b");
}

INSTANTIATE_TEST_SUITE_P(LockWatch, NoticeTest, ::testing::Values(true, false),
                         [](const auto& info) {
                           return info.param ? std::string("Notified") : std::string("Polling");
                         });

TEST(LeaderElectorTest, ANoticeOfAReleasedLeaseTriesAtOnce) {
  FakeApiServer server;
  FakeLeases leases(server);
  leases.put(kNs, kName, held_spec("other", wall_text(0s)));
  auto notices = std::make_shared<ScriptedNotices>();
  Candidate b(server, "b", false, nullptr, std::make_unique<NotifyingLock>(server, notices, true));
  b.start();  // sees "other"; the next try is due at 2 s
  b.clock->advance(500ms);
  leases.put(kNs, kName, R"({"holderIdentity":"","leaseDurationSeconds":1,"leaseTransitions":3})");
  notices->notify(leases.record(kNs, kName));
  // No step: the notice itself brings the try, at 0.5 s.
  ASSERT_TRUE(eventually([&] { return b.elector->is_leader(); }));
  EXPECT_EQ(b.elapsed_ms(), 500ms);
  EXPECT_EQ(leases.record(kNs, kName)->holder_identity, "b");
  EXPECT_EQ(leases.record(kNs, kName)->leader_transitions, 4);
  EXPECT_EQ(b.new_leaders(), (std::vector<std::string>{"other", "", "b"}));
}

TEST(LeaderElectorTest, ANoticeOfADeletedLeaseTriesAtOnce) {
  FakeApiServer server;
  FakeLeases leases(server);
  leases.put(kNs, kName, held_spec("other", wall_text(0s)));
  auto notices = std::make_shared<ScriptedNotices>();
  Candidate b(server, "b", false, nullptr, std::make_unique<NotifyingLock>(server, notices, true));
  b.start();
  b.clock->advance(300ms);
  leases.remove(kNs, kName);
  notices->notify(std::nullopt);
  ASSERT_TRUE(eventually([&] { return b.elector->is_leader(); }));  // it created the Lease
  EXPECT_EQ(b.elapsed_ms(), 300ms);
  EXPECT_EQ(leases.record(kNs, kName)->holder_identity, "b");
}

TEST(LeaderElectorTest, ATryAtTheObservedExpiryThatFailsWaitsARetryPeriod) {
  FakeApiServer server;
  FakeLeases leases(server);
  leases.put(kNs, kName, held_spec("other", wall_text(0s)));
  auto notices = std::make_shared<ScriptedNotices>();
  Candidate b(server, "b", false, nullptr, std::make_unique<NotifyingLock>(server, notices, true));
  b.start();
  b.clock->advance(1s);
  leases.put(kNs, kName, held_spec("other", wall_text(1s)));
  notices->notify(leases.record(kNs, kName));  // expires at 16 s
  ASSERT_TRUE(b.clock->wait_sleeps(2));
  for (int t = 2; t <= 14; t += 2) ASSERT_TRUE(b.clock->step());
  leases.set_fault([](const Request&) -> std::optional<Reply> {
    return Reply::api_status(500, "InternalError", "etcd is down");
  });
  ASSERT_TRUE(b.clock->step());  // 16 s: the try at the expiry fails
  EXPECT_EQ(b.elapsed_ms(), 16s);
  EXPECT_FALSE(b.elector->is_leader());
  // Not again at once: the ordinary jittered retry.
  EXPECT_EQ(b.clock->waits().back(), 2s);
  leases.set_fault(nullptr);
  ASSERT_TRUE(b.clock->step());
  EXPECT_TRUE(b.elector->is_leader());
  EXPECT_EQ(b.elapsed_ms(), 18s);
}

TEST(LeaderElectorTest, ALeaderIgnoresNoticesAndRenewsEveryRetryPeriod) {
  FakeApiServer server;
  FakeLeases leases(server);
  auto notices = std::make_shared<ScriptedNotices>();
  Candidate a(server, "a", false, nullptr, std::make_unique<NotifyingLock>(server, notices, true));
  a.start();
  ASSERT_TRUE(a.elector->is_leader());
  // Its own renewals told late, out of order with what it wrote: nothing changes.
  notices->notify(controller::LeaderElectionRecord{.holder_identity = "someone-else",
                                                   .lease_duration_seconds = 15});
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(a.clock->step());
    EXPECT_TRUE(a.elector->is_leader());
  }
  for (auto w : a.clock->waits()) EXPECT_EQ(w, 2s);
  EXPECT_EQ(a.new_leaders(), std::vector<std::string>{"a"});
}

struct BadOption {
  const char* field;
  std::function<void(LeaderElectionOptions&)> edit;
};

TEST(LeaderElectorTest, InvalidOptionsThrowAConfigErrorNamingTheField) {
  FakeApiServer server;
  const std::vector<BadOption> cases = {
      {"lease_namespace", [](auto& o) { o.lease_namespace.clear(); }},
      {"lease_name", [](auto& o) { o.lease_name.clear(); }},
      {"identity", [](auto& o) { o.identity.clear(); }},
      {"client", [](auto& o) { o.client.reset(); }},
      {"retry_period", [](auto& o) { o.retry_period = 0ms; }},
      {"lease_duration", [](auto& o) { o.lease_duration = 15500ms; }},
      {"lease_duration", [](auto& o) { o.lease_duration = 0ms; }},
      {"renew_deadline", [](auto& o) { o.renew_deadline = 15s; }},
      {"renew_deadline", [](auto& o) { o.retry_period = 9s; }},
  };
  for (const auto& c : cases) {
    LeaderElectionOptions o;
    o.lease_namespace = kNs;
    o.lease_name = kName;
    o.identity = "a";
    o.client = make_client(server);
    c.edit(o);
    try {
      LeaderElector e(std::move(o));
      ADD_FAILURE() << c.field << ": accepted";
    } catch (const client::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(c.field), std::string::npos) << e.what();
    }
  }
  LeaderElectionOptions ok;
  ok.lease_namespace = kNs;
  ok.lease_name = kName;
  ok.identity = "a";
  ok.client = make_client(server);
  EXPECT_NO_THROW(LeaderElector(std::move(ok)));
}

}  // namespace
}  // namespace kinformer::testing
