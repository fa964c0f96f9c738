// Informer and handler metrics, read back from the registry.
#include "kinformer/informer/metrics.h"

#include <atomic>
#include <latch>

#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include "kinformer/prometheus/prometheus_registry.h"

#include "metric_value.h"
#include "test_env.h"

namespace kinformer::informer {
namespace {

using client::EventType;
using testing::Env;
using testing::event;
using testing::make_object;
using testing::metric;
using testing::RecordingHandler;

TEST(MetricsTest, EveryMetricIsReadableFromTheRegistry) {
  auto metrics = std::make_shared<prom::PrometheusRegistry>();
  auto registry = metrics->registry_ptr();
  FactoryOptions fo;
  fo.registry = metrics;
  fo.budget.burst = 1;
  fo.budget.per_second = 0.001;
  fo.budget.burst_per_informer = 0;  // a bucket this informer empties: denials are counted
  fo.budget.per_second_per_informer = 0;
  Env env(fo);
  env.fake->add_list({make_object("ns", "a", "1")}, "10");
  env.fake->add_watch()
      ->push(event(EventType::added, make_object("ns", "b", "11")))
      .push(event(EventType::modified, make_object("ns", "b", "12")))
      .push(event(EventType::deleted, make_object("ns", "b", "13")))
      .push(testing::bookmark("14"))
      .fail(client::Error::make(client::Errc::network, "reset"));
  auto w2 = env.fake->add_watch();
  w2->fail(testing::api_error(410, "Expired"));
  env.fake->add_list({make_object("ns", "a", "1")}, "20");  // the relist still has a
  auto& inf = env.factory->informer(testing::test_type(), testing::selector_options("app=x"));
  auto h = std::make_shared<RecordingHandler>();
  h->hook = [](const std::string& e) {
    if (e == "add ns/a 1 initial") throw std::runtime_error("x");
  };
  HandlerOptions ho;
  ho.name = "mesh";
  auto reg = inf.add_handler(h, ho);
  env.factory->start();
  ASSERT_TRUE(env.fake->wait_watches(3));
  ASSERT_TRUE(env.fake->wait_lists(2));
  ASSERT_TRUE(testing::eventually([&] { return reg.exceptions() == 1; }));
  ASSERT_TRUE(testing::eventually([&] { return inf.metrics().restarts_expired.value() == 1; }));
  std::map<std::string, std::string> l{{"resource", "pods"},
                                       {"selector", selector_hash("app=x", "")}};
  // wait_watches() returns when the watch was asked for; the gauge moves just after it opened.
  ASSERT_TRUE(testing::eventually([&] { return inf.metrics().open_watches.value() == 1; }));
  EXPECT_EQ(metric(*registry, "kinformer_open_watches", l), 1);
  EXPECT_GE(metric(*registry, "kinformer_watch_starts_total", l), 2);
  auto with = [&](std::string k, std::string v) {
    auto m = l;
    m[k] = v;
    return m;
  };
  EXPECT_EQ(metric(*registry, "kinformer_watch_restarts_total", with("reason", "error")), 1);
  EXPECT_EQ(metric(*registry, "kinformer_watch_restarts_total", with("reason", "expired")), 1);
  EXPECT_EQ(metric(*registry, "kinformer_watch_restarts_total", with("reason", "timeout")), 0);
  EXPECT_EQ(metric(*registry, "kinformer_lists_total", with("kind", "initial")), 1);
  EXPECT_GE(metric(*registry, "kinformer_list_duration_seconds", l), 1);
  EXPECT_EQ(metric(*registry, "kinformer_watch_events_total", with("type", "ADDED")), 1);
  EXPECT_EQ(metric(*registry, "kinformer_watch_events_total", with("type", "MODIFIED")), 1);
  EXPECT_EQ(metric(*registry, "kinformer_watch_events_total", with("type", "DELETED")), 1);
  EXPECT_EQ(metric(*registry, "kinformer_watch_events_total", with("type", "BOOKMARK")), 1);
  // After the relist the cache holds exactly ns/a.
  EXPECT_TRUE(
      testing::eventually([&] { return metric(*registry, "kinformer_cache_objects", l) == 1; }));
  EXPECT_GT(metric(*registry, "kinformer_last_sync_timestamp_seconds", l), 0);
  EXPECT_GE(metric(*registry, "kinformer_backoff_waits_total", l), 1);
  EXPECT_GE(metric(*registry, "kinformer_reconnect_budget_denials_total", l), 1);
  // Not a WatchList informer: the series exist, at 0 (their counts: ReflectorTest.WatchList*).
  EXPECT_EQ(metric(*registry, "kinformer_watch_list_fallbacks_total", with("reason", "refused")),
            0);
  EXPECT_EQ(metric(*registry, "kinformer_watch_list_fallbacks_total",
                   with("reason", "initial_events_timeout")),
            0);
  EXPECT_EQ(metric(*registry, "kinformer_registered_handlers", l), 1);
  EXPECT_EQ(metric(*registry, "kinformer_requests_total", with("verb", "list")), 2);
  EXPECT_GE(metric(*registry, "kinformer_requests_total", with("verb", "watch")), 3);
  auto hl = with("handler", "mesh");
  hl["id"] = std::to_string(reg.id());
  // Once the handler has drained its queue: depth 0, not stalled (0), lag observed per delivery.
  EXPECT_TRUE(testing::eventually([&] {
    return metric(*registry, "kinformer_handler_queue_depth", hl) == 0 &&
           metric(*registry, "kinformer_handler_stalled_since_seconds", hl) == 0;
  }));
  EXPECT_GE(metric(*registry, "kinformer_handler_delivery_lag_seconds", hl), 1);
  EXPECT_EQ(metric(*registry, "kinformer_handler_exceptions_total", hl), 1);
  reg.close();
  EXPECT_EQ(metric(*registry, "kinformer_handler_exceptions_total", hl), -1) << "removed on close";
  EXPECT_EQ(metric(*registry, "kinformer_registered_handlers", l), 0);
}

TEST(MetricsTest, HandlerGaugesFollowAStuckHandlerAndInformerGaugesFollowTheCache) {
  auto metrics = std::make_shared<prom::PrometheusRegistry>();
  auto registry = metrics->registry_ptr();
  FactoryOptions fo;
  fo.registry = metrics;
  Env env(fo);
  env.fake->add_list({make_object("ns", "a", "1"), make_object("ns", "b", "2")}, "10");
  auto watch = env.fake->add_watch();
  auto& inf = env.factory->informer(testing::test_type());
  std::latch entered(1);
  std::latch release(1);
  auto h = std::make_shared<RecordingHandler>();
  std::atomic<bool> first{true};
  h->hook = [&](const std::string&) {  // the first callback blocks, whichever object it is
    if (first.exchange(false)) {
      entered.count_down();
      release.wait();
    }
  };
  HandlerOptions ho;
  ho.name = "stuck";
  auto reg = inf.add_handler(h, ho);
  env.factory->start();
  entered.wait();
  ASSERT_TRUE(env.fake->wait_watches(1));
  watch->push(event(EventType::added, make_object("ns", "c", "11")));
  ASSERT_TRUE(testing::eventually([&] { return inf.store().size() == 3; }));

  std::map<std::string, std::string> l{{"resource", "pods"}, {"selector", ""}};
  auto hl = l;
  hl["handler"] = "stuck";
  hl["id"] = std::to_string(reg.id());
  EXPECT_EQ(metric(*registry, "kinformer_cache_objects", l), 3);
  EXPECT_EQ(metric(*registry, "kinformer_open_watches", l), 1);
  // Stuck in its first callback: it started at a real time, and the other two wait for it.
  EXPECT_GT(metric(*registry, "kinformer_handler_stalled_since_seconds", hl), 1.6e9);
  EXPECT_TRUE(testing::eventually([&] {
    return metric(*registry, "kinformer_handler_queue_depth", hl) == 2;
  })) << "gauge "
      << metric(*registry, "kinformer_handler_queue_depth", hl) << " registration "
      << reg.queue_depth();

  release.count_down();
  ASSERT_TRUE(h->wait_count(3));
  EXPECT_TRUE(testing::eventually(
      [&] { return metric(*registry, "kinformer_handler_stalled_since_seconds", hl) == 0; }));
  EXPECT_EQ(metric(*registry, "kinformer_handler_queue_depth", hl), 0);
  EXPECT_EQ(metric(*registry, "kinformer_handler_delivery_lag_seconds", hl), 3)
      << "one lag sample per delivered notification";
  env.factory->shutdown();
  EXPECT_EQ(metric(*registry, "kinformer_open_watches", l), 0);
  EXPECT_EQ(metric(*registry, "kinformer_watch_restarts_total",
                   {{"resource", "pods"}, {"selector", ""}, {"reason", "shutdown"}}),
            1);
}

// Delivery lag is measured on the factory's clock, at enqueueing and at delivery: on the
// ManualClock, a notification that waited while 5 s passed reports exactly those 5 s, and the
// one delivered at once reports none (real time would give neither).
TEST(MetricsTest, HandlerDeliveryLagIsMeasuredOnTheInjectedClock) {
  auto metrics = std::make_shared<prom::PrometheusRegistry>();
  auto registry = metrics->registry_ptr();
  FactoryOptions fo;
  fo.registry = metrics;
  Env env(fo);
  env.fake->add_list({make_object("ns", "a", "1")}, "10");
  auto watch = env.fake->add_watch();
  auto& inf = env.factory->informer(testing::test_type());
  std::latch entered(1);
  std::latch release(1);
  auto h = std::make_shared<RecordingHandler>();
  std::atomic<bool> first{true};
  h->hook = [&](const std::string&) {
    if (first.exchange(false)) {
      entered.count_down();
      release.wait();
    }
  };
  HandlerOptions ho;
  ho.name = "lagging";
  auto reg = inf.add_handler(h, ho);
  env.factory->start();
  entered.wait();  // delivering ns/a, enqueued and taken at the same manual instant
  ASSERT_TRUE(env.fake->wait_watches(1));
  watch->push(event(EventType::added, make_object("ns", "b", "11")));
  ASSERT_TRUE(testing::eventually([&] { return inf.store().size() == 2; }));
  env.clock->advance(std::chrono::seconds(5));
  release.count_down();
  ASSERT_TRUE(h->wait_count(2));
  auto lag = [&] {
    for (const auto& fam : registry->Collect()) {
      if (fam.name != "kinformer_handler_delivery_lag_seconds") continue;
      for (const auto& m : fam.metric) {
        for (const auto& lp : m.label) {
          if (lp.name == "handler" && lp.value == "lagging") return m.histogram;
        }
      }
    }
    return prometheus::ClientMetric::Histogram{};
  };
  ASSERT_TRUE(testing::eventually([&] { return lag().sample_count == 2; }));
  EXPECT_DOUBLE_EQ(lag().sample_sum, 5.0);
}

}  // namespace
}  // namespace kinformer::informer
