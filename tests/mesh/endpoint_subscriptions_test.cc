// EndpointSubscriptions tests (label "concurrency"): run under TSan too. Deadlines are failure
// guards only; no test sleeps or asserts on elapsed real time (lag and stalled-since are read
// from a ManualClock that only the test advances).
#include "kinformer/mesh/endpoint_subscriptions.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include "kinformer/prometheus/prometheus_registry.h"

#include "fakes.h"
#include "log_capture.h"

namespace kinformer::mesh {
namespace {

using namespace informer;

using namespace std::chrono_literals;
using testing::Gate;
using testing::ManualClock;

constexpr auto kGuard = 20s;  // failure guard only

/// Records delivered snapshots; wait_version(v) until one with version >= v arrived.
class Deliveries {
 public:
  void add(const EndpointSnapshotPtr& s) {
    std::lock_guard lock(mu_);
    seen_.push_back(s);
    cv_.notify_all();
  }
  bool wait_version(std::uint64_t v) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kGuard, [&] { return !seen_.empty() && seen_.back()->version >= v; });
  }
  bool wait_count(std::size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kGuard, [&] { return seen_.size() >= n; });
  }
  std::vector<EndpointSnapshotPtr> all() {
    std::lock_guard lock(mu_);
    return seen_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<EndpointSnapshotPtr> seen_;
};

std::shared_ptr<const client::EndpointSlice> slice(int n_endpoints, std::string name = "s1") {
  auto s = std::make_shared<client::EndpointSlice>();
  s->metadata.namespace_ = "ns";
  s->metadata.name = std::move(name);
  s->metadata.labels = {{"kubernetes.io/service-name", "svc"}};
  s->ports = {{"http", 80, "TCP", ""}};
  for (int i = 0; i < n_endpoints; ++i) {
    client::SliceEndpoint e;
    e.addresses = {"10.0.0." + std::to_string(i + 1)};
    s->endpoints.push_back(std::move(e));
  }
  return s;
}

EndpointQuery svc_http() {
  EndpointQuery q;
  q.service = {"ns", "svc"};
  q.port_name = "http";
  return q;
}

HandlerExecutorPtr pool_of(std::size_t threads) {
  HandlerExecutorOptions o;
  o.threads = threads;
  o.blocking_threshold = 10ms;
  return std::make_shared<HandlerExecutor>(o);
}

// Rule: coalescing per subscriber. Mutant endpoint-subscriber-backlog: the pending slot keeps
// every snapshot, so a slow subscriber works through a backlog.
TEST(EndpointSubscriptionsTest, SlowSubscriberGetsTheNewestSnapshotNotABacklog) {
  auto index = std::make_shared<EndpointIndex>();
  EndpointSubscriptions subs(index, pool_of(2));
  Gate entered, release;
  Deliveries got;
  auto sub = subs.subscribe(svc_http(), [&](const EndpointSnapshotPtr& s) {
    got.add(s);
    if (got.all().size() == 1) {
      entered.open();
      release.wait();
    }
  });
  ASSERT_TRUE(entered.wait());  // in the callback with the initial (empty) snapshot
  for (int i = 1; i <= 10; ++i) index->upsert_slice("c1", slice(i));
  const std::uint64_t newest = index->snapshot(svc_http())->version;
  release.open();
  ASSERT_TRUE(got.wait_version(newest));
  // A delivery of anything older than `newest` after the release would be a backlog.
  EXPECT_TRUE(testing::eventually([&] { return sub.stats().delivered_version == newest; }));
  auto all = got.all();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_TRUE(all[0]->clusters.empty());
  EXPECT_EQ(all[1]->version, newest);
  EXPECT_EQ(all[1]->cluster("c1")->endpoints.size(), 10u);
  auto st = sub.stats();
  EXPECT_EQ(st.deliveries, 2u);
  EXPECT_EQ(st.coalesced, 9u);
  EXPECT_EQ(st.latest_version, newest);
  sub.close();
}

// Rule: a stuck subscriber delays neither the index nor any other subscriber. Mutant
// endpoint-subscriber-delivered-inline: the index's callback runs the subscriber's callback on
// the input's thread. Everything that could block runs on a driver thread, so a regression fails
// the test instead of hanging it.
TEST(EndpointSubscriptionsTest, StuckSubscriberDelaysNeitherTheIndexNorOthers) {
  auto index = std::make_shared<EndpointIndex>();
  auto clock = std::make_shared<ManualClock>();
  EndpointSubscriptions subs(index, pool_of(1), clock);  // one worker: the stuck one holds it
  Gate release, inputs_done, stuck_entered;
  Deliveries fast;
  std::optional<Subscription> stuck, other;
  std::uint64_t newest = 0;
  std::thread driver([&] {
    stuck.emplace(subs.subscribe(
        svc_http(),
        [&](const EndpointSnapshotPtr&) {
          stuck_entered.open();
          release.wait();
        },
        SubscriberOptions{"stuck", 5000ms}));
    other.emplace(subs.subscribe(
        svc_http(), [&](const EndpointSnapshotPtr& s) { fast.add(s); },
        SubscriberOptions{"other", 5000ms}));
    for (int i = 1; i <= 5; ++i) index->upsert_slice("c1", slice(i));
    newest = index->snapshot(svc_http())->version;
    inputs_done.open();
  });
  const bool done = inputs_done.wait();
  EXPECT_TRUE(done) << "an index input waited for the stuck subscriber";
  EXPECT_TRUE(stuck_entered.wait());
  if (done) {
    EXPECT_TRUE(fast.wait_version(newest)) << "the other subscriber waited for the stuck one";
    clock->advance(7s);
    auto st = stuck->stats();
    EXPECT_EQ(st.delivered_version, 0u);
    EXPECT_EQ(st.latest_version, newest);
    ASSERT_TRUE(st.stalled_since.has_value());
    EXPECT_EQ(clock->now() - *st.stalled_since, 7s);
    EXPECT_EQ(st.lag, 7s);
    // Delivered once its callback returned, a moment after the snapshot was recorded.
    EXPECT_TRUE(testing::eventually([&] { return other->stats().delivered_version == newest; }));
  }
  release.open();
  driver.join();
  ASSERT_TRUE(stuck.has_value());
  EXPECT_TRUE(testing::eventually([&] { return stuck->stats().delivered_version == newest; }));
  EXPECT_TRUE(stuck->close());
  EXPECT_TRUE(other->close());
}

// Rule: per subscriber the delivered and applied versions, the lag and stalled-since are
// observable. Mutant endpoint-subscriber-stalled-since-unset.
TEST(EndpointSubscriptionsTest, StatsAndMetricsSeparateDeliveredFromApplied) {
  auto index = std::make_shared<EndpointIndex>();
  auto clock = std::make_shared<ManualClock>();
  auto metrics = std::make_shared<prom::PrometheusRegistry>();
  auto registry = metrics->registry_ptr();
  EndpointSubscriptions subs(index, pool_of(2), clock, metrics);
  Gate entered, release;
  Deliveries got;
  bool first = true;
  auto sub = subs.subscribe(
      svc_http(),
      [&](const EndpointSnapshotPtr& s) {
        got.add(s);
        if (!first) return;
        first = false;
        entered.open();
        release.wait();
      },
      SubscriberOptions{"proxy-group-a", 5000ms});
  ASSERT_TRUE(entered.wait());
  const auto t0 = clock->now();
  index->upsert_slice("c1", slice(1));
  clock->advance(2s);
  auto st = sub.stats();
  EXPECT_EQ(st.stalled_since, std::optional<Clock::TimePoint>(t0));  // EXPECT: release below
  EXPECT_EQ(st.lag, 2s);  // the initial snapshot, in the callback since t0
  EXPECT_EQ(st.delivered_version, 0u);

  release.open();
  const std::uint64_t v = index->snapshot(svc_http())->version;
  ASSERT_TRUE(got.wait_version(v));
  ASSERT_TRUE(testing::eventually([&] { return sub.stats().delivered_version == v; }));
  st = sub.stats();
  EXPECT_FALSE(st.stalled_since.has_value());
  EXPECT_EQ(st.lag, Clock::Duration::zero());
  EXPECT_EQ(st.applied_version, 0u) << "delivered is not applied";
  sub.ack(v);
  sub.ack(v - 1);  // an older ack never moves it back
  EXPECT_EQ(sub.stats().applied_version, v);

  auto value = [&](const std::string& family) -> double {
    for (const auto& f : registry->Collect()) {
      if (f.name != family) continue;
      for (const auto& m : f.metric) {
        for (const auto& l : m.label) {
          if (l.name == "subscriber" && l.value == "proxy-group-a") return m.gauge.value;
        }
      }
    }
    return -1;
  };
  EXPECT_EQ(value("kinformer_endpoint_subscriber_delivered_version"), static_cast<double>(v));
  EXPECT_EQ(value("kinformer_endpoint_subscriber_applied_version"), static_cast<double>(v));
  EXPECT_EQ(value("kinformer_endpoint_subscriber_stalled_since_seconds"), 0.0);
  sub.close();
  EXPECT_EQ(value("kinformer_endpoint_subscriber_delivered_version"), -1)
      << "series removed on close";
}

// Rule: one metric series has one owner. Two subscribers with one name (explicit, or the default
// name from two EndpointSubscriptions on one registry) have series of their own: closing one
// removes its series only, and the survivor's keep moving. (prometheus-cpp hands out the existing
// series for equal labels and frees it on Remove; ASan does not see writes inside the library,
// so the survivor's series is checked in the registry.) Mutant endpoint-subscriber-series-shared.
TEST(EndpointSubscriptionsTest, SubscribersWithOneNameOwnSeriesOfTheirOwn) {
  auto index = std::make_shared<EndpointIndex>();
  auto metrics = std::make_shared<prom::PrometheusRegistry>();
  auto registry = metrics->registry_ptr();
  auto pool = pool_of(2);
  EndpointSubscriptions a(index, pool, nullptr, metrics);
  EndpointSubscriptions b(index, pool, nullptr, metrics);
  // delivered_version by (subscriber, id); a series that is gone is absent.
  auto delivered = [&] {
    std::map<std::pair<std::string, std::string>, double> out;
    for (const auto& f : registry->Collect()) {
      if (f.name != "kinformer_endpoint_subscriber_delivered_version") continue;
      for (const auto& m : f.metric) {
        std::string name, id;
        for (const auto& l : m.label) {
          if (l.name == "subscriber") name = l.value;
          if (l.name == "id") id = l.value;
        }
        out[{name, id}] = m.gauge.value;
      }
    }
    return out;
  };
  for (bool named : {true, false}) {
    SCOPED_TRACE(named ? "explicit name" : "default name");
    SubscriberOptions o;
    if (named) o.name = "proxies";
    Deliveries got_a, got_b;
    auto sub_a = a.subscribe(
        svc_http(), [&](const EndpointSnapshotPtr& s) { got_a.add(s); }, o);
    auto sub_b = b.subscribe(
        svc_http(), [&](const EndpointSnapshotPtr& s) { got_b.add(s); }, o);
    ASSERT_TRUE(got_a.wait_count(1));
    ASSERT_TRUE(got_b.wait_count(1));
    ASSERT_TRUE(testing::eventually([&] { return delivered().size() == 2; }))
        << "two subscribers, two series";
    sub_a.close();
    ASSERT_EQ(delivered().size(), 1u) << "closing one removes its own series only";

    index->upsert_slice("c1", slice(named ? 1 : 2));
    const std::uint64_t v = index->snapshot(svc_http())->version;
    ASSERT_TRUE(got_b.wait_version(v));
    ASSERT_TRUE(testing::eventually([&] { return sub_b.stats().delivered_version == v; }));
    auto left = delivered();
    ASSERT_EQ(left.size(), 1u);
    EXPECT_EQ(left.begin()->second, static_cast<double>(v)) << "the survivor's series moves";
    sub_b.close();
    EXPECT_TRUE(delivered().empty());
  }
}

// Rule: a subscriber's troubles are logged through the component's LogSink, naming the
// subscriber and what was thrown; the next snapshot is delivered as usual.
TEST(EndpointSubscriptionsTest, AThrowingCallbackIsLoggedThroughTheSink) {
  testing::LogCapture capture;
  auto index = std::make_shared<EndpointIndex>();
  EndpointSubscriptions subs(index, pool_of(1), nullptr, nullptr, capture.sink());
  Deliveries got;
  auto sub = subs.subscribe(
      svc_http(),
      [&](const EndpointSnapshotPtr& s) {
        got.add(s);
        if (got.all().size() == 1) throw std::runtime_error("proxy push failed");
      },
      SubscriberOptions{.name = "proxy-group-b"});
  ASSERT_TRUE(got.wait_count(1));
  index->upsert_slice("c1", slice(1));
  ASSERT_TRUE(got.wait_count(2));
  auto lines = capture.with_message("endpoint subscriber callback threw");
  ASSERT_EQ(lines.size(), 1u) << capture.text();
  EXPECT_EQ(lines[0].level, client::LogLevel::error);
  EXPECT_EQ(lines[0].field("subscriber"), "proxy-group-b");
  EXPECT_EQ(lines[0].field("error"), "proxy push failed");
}

TEST(EndpointSubscriptionsTest, CloseStopsDeliveryAndMayRunFromTheCallback) {
  auto index = std::make_shared<EndpointIndex>();
  EndpointSubscriptions subs(index, pool_of(2));
  Deliveries got;
  Subscription self;
  Gate closed_inside;
  std::mutex mu;
  std::unique_lock hold(mu);  // the callback closes `self` only once it is assigned
  self = subs.subscribe(svc_http(), [&](const EndpointSnapshotPtr& s) {
    got.add(s);
    std::lock_guard l(mu);
    EXPECT_FALSE(self.close()) << "from inside the callback close() does not wait for itself";
    closed_inside.open();
  });
  hold.unlock();
  ASSERT_TRUE(closed_inside.wait());
  EXPECT_FALSE(self.active());
  index->upsert_slice("c1", slice(1));
  EXPECT_EQ(index->subset_count(), 0u);
  EXPECT_EQ(got.all().size(), 1u);

  // A subscription may outlive the subscriptions object, the index and the executor.
  Subscription late;
  {
    auto idx = std::make_shared<EndpointIndex>();
    EndpointSubscriptions s2(idx, pool_of(1));
    late = s2.subscribe(svc_http(), [&](const EndpointSnapshotPtr&) {});
  }
  EXPECT_TRUE(late.close());
}

}  // namespace
}  // namespace kinformer::mesh
