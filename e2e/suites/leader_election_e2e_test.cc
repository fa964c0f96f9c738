// Leader election against a real API server: two electors in one process compete for one Lease
// with short durations. Asserts orderings (never two leaders at once, who leads after whom),
// never how long a hand-over took.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "e2e_env.h"
#include "kinformer/controller/leader_election.h"
#include "kinformer/controller/lease_lock.h"

namespace kinformer::e2e {
namespace {

using namespace std::chrono_literals;

constexpr const char* kLease = "e2e-election";

/// What the electors' callbacks saw, in the order they saw it, and how many led at once.
class Journal {
 public:
  void started(const std::string& id) {
    std::lock_guard lock(mu_);
    ++leading_;
    max_leading_ = std::max(max_leading_, leading_);
    events_.push_back(id + " started");
  }
  void work_stopped(const std::string& id) {
    std::lock_guard lock(mu_);
    --leading_;
    events_.push_back(id + " work stopped");
  }
  void stopped(const std::string& id) {
    std::lock_guard lock(mu_);
    events_.push_back(id + " stopped");
  }
  std::vector<std::string> events() const {
    std::lock_guard lock(mu_);
    return events_;
  }
  int max_leading() const {
    std::lock_guard lock(mu_);
    return max_leading_;
  }
  /// The position of `event`, or -1.
  long index(const std::string& event) const {
    auto e = events();
    auto it = std::find(e.begin(), e.end(), event);
    return it == e.end() ? -1 : it - e.begin();
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> events_;
  int leading_ = 0;
  int max_leading_ = 0;
};

class LeaderElectionE2E : public ::testing::Test {
 protected:
  void SetUp() override { ns_ = create_namespace(admin_, "leader-election-e2e"); }

  std::unique_ptr<controller::LeaderElector> elector(const std::string& id, bool release) {
    auto options = fast_client_options();
    options.request_timeout = 1s;  // below renew_deadline - retry_period
    controller::LeaderElectionOptions o;
    o.lease_namespace = ns_;
    o.lease_name = kLease;
    o.identity = id;
    o.client = std::make_shared<client::RestClient>(admin_config(), options);
    o.lease_duration = 3s;
    o.renew_deadline = 2s;
    o.retry_period = 500ms;
    o.release_on_stop = release;
    o.callbacks.on_started_leading = [this, id](std::stop_token stop) {
      journal_.started(id);
      std::mutex m;
      std::condition_variable_any cv;
      std::unique_lock lock(m);
      cv.wait(lock, stop, [] { return false; });
      journal_.work_stopped(id);
    };
    o.callbacks.on_stopped_leading = [this, id] { journal_.stopped(id); };
    return std::make_unique<controller::LeaderElector>(std::move(o));
  }

  std::optional<controller::LeaderElectionRecord> lease() {
    auto got = admin_.get(controller::lease_resource(), ns_, kLease);
    if (!got) return std::nullopt;
    auto lease = std::static_pointer_cast<const client::DynamicObject>(*got);
    auto record = controller::lease_record_from_json(lease->json);
    if (!record) return std::nullopt;
    return *record;
  }

  // Starts a and b; returns {leader, follower} once one leads, the other has seen it, and the
  // leader has renewed a few times.
  std::pair<controller::LeaderElector*, controller::LeaderElector*> elect(
      controller::LeaderElector& a, controller::LeaderElector& b) {
    a.start();
    b.start();
    EXPECT_TRUE(eventually([&] { return a.is_leader() || b.is_leader(); }));
    auto* leader = a.is_leader() ? &a : &b;
    auto* follower = leader == &a ? &b : &a;
    EXPECT_TRUE(eventually([&] { return follower->leader() == leader->identity(); }));
    // Renewals keep it leading: renewTime moves on while the other never leads.
    std::optional<controller::MicroTime> first;
    int renewals = 0;
    EXPECT_TRUE(eventually(
        [&] {
          auto r = lease();
          if (!r || r->holder_identity != leader->identity()) return false;
          if (r->renew_time != first) {
            first = r->renew_time;
            ++renewals;
          }
          return renewals >= 5;
        },
        60s));
    EXPECT_TRUE(leader->is_leader());
    EXPECT_FALSE(follower->is_leader());
    return {leader, follower};
  }

  client::RestClient admin_{admin_config(), fast_client_options()};
  std::string ns_;
  Journal journal_;
};

TEST_F(LeaderElectionE2E, ExactlyOneLeadsAndAReleaseHandsTheLeaseOverAtOnce) {
  auto a = elector("a", /*release=*/true);
  auto b = elector("b", /*release=*/true);
  auto [leader, follower] = elect(*a, *b);
  const std::string old_id = leader->identity();
  const std::string new_id = follower->identity();
  const int transitions = lease()->leader_transitions;

  leader->stop();
  // Released: no holder, a lease of one second.
  auto released = lease();
  ASSERT_TRUE(released);
  if (released->holder_identity.empty()) {
    EXPECT_EQ(released->lease_duration_seconds, 1);
  } else {
    EXPECT_EQ(released->holder_identity, new_id);  // the follower was quicker than this read
  }
  ASSERT_TRUE(eventually([&] { return follower->is_leader(); }));
  auto taken = lease();
  ASSERT_TRUE(taken);
  EXPECT_EQ(taken->holder_identity, new_id);
  EXPECT_EQ(taken->leader_transitions, transitions + 1);
  follower->stop();

  // The old leader's work had returned before the new one started: never two leaders.
  EXPECT_EQ(journal_.max_leading(), 1);
  const long old_stopped = journal_.index(old_id + " stopped");
  const long new_started = journal_.index(new_id + " started");
  ASSERT_GE(old_stopped, 0);
  ASSERT_GE(new_started, 0);
  EXPECT_LT(journal_.index(old_id + " work stopped"), old_stopped);
  EXPECT_LT(old_stopped, new_started);
  EXPECT_EQ(lease()->holder_identity, "");  // the second one released it too
}

TEST_F(LeaderElectionE2E, WithoutAReleaseTheOtherLeadsOnlyOnceTheLeaseExpired) {
  auto a = elector("a", /*release=*/false);
  auto b = elector("b", /*release=*/false);
  auto [leader, follower] = elect(*a, *b);
  const std::string old_id = leader->identity();
  const std::string new_id = follower->identity();

  leader->stop();
  auto kept = lease();
  ASSERT_TRUE(kept);
  // Not released: the record still names the old leader (unless the lease expired already).
  if (kept->holder_identity == old_id) {
    EXPECT_EQ(kept->lease_duration_seconds, 3);
  }
  ASSERT_TRUE(eventually([&] { return follower->is_leader(); }));
  EXPECT_EQ(lease()->holder_identity, new_id);
  follower->stop();

  EXPECT_EQ(journal_.max_leading(), 1);
  EXPECT_LT(journal_.index(old_id + " stopped"), journal_.index(new_id + " started"));
  EXPECT_EQ(lease()->holder_identity, new_id);  // left to expire, not released
}

}  // namespace
}  // namespace kinformer::e2e
