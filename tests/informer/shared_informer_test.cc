// SharedInformer: transforms and last_error(). Handler queues: listener_test.cc; the factory:
// informer_factory_test.cc; metrics: metrics_test.cc.
#include "kinformer/informer/shared_informer.h"

#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include "kinformer/prometheus/prometheus_registry.h"

#include "kinformer/client/error.h"
#include "metric_value.h"
#include "test_env.h"

namespace kinformer::informer {
namespace {

using testing::Env;
using testing::make_object;
using testing::metric;

TEST(SharedInformerTest, TransformAppliedBeforeStoringAndConflictsAreErrors) {
  Env env;
  env.fake->add_list({make_object("ns", "a", "1", {}, "big payload")}, "10");
  cache::Transform strip{"strip-payload", [](client::ObjectPtr o) -> client::ObjectPtr {
                           auto copy = std::make_shared<testing::TestObject>(
                               static_cast<const testing::TestObject&>(*o));
                           copy->payload.clear();
                           return copy;
                         }};
  InformerOptions opts;
  opts.transform = strip;
  auto& inf = env.factory->informer(testing::test_type(), opts);
  EXPECT_EQ(&env.factory->informer(testing::test_type(), opts), &inf);
  EXPECT_THROW(env.factory->informer(testing::test_type()), client::ConfigError);
  InformerOptions other = opts;
  other.transform->name = "other";
  EXPECT_THROW(env.factory->informer(testing::test_type(), other), client::ConfigError);
  env.factory->start();
  ASSERT_TRUE(inf.wait_for_sync(testing::kDeadline));
  EXPECT_EQ(testing::payload_of(inf.store().get("ns/a")), "");
}

// Auth faults (issue 10): while lists fail, last_error() names the failing request (verb,
// bounded reason, the server's message, how many in a row) and the failures are counted by
// reason; the informer stays unsynced, and the first request that succeeds clears the error.
// Backoff waits are held on the ManualClock, so each retry happens when the test says so.
TEST(SharedInformerTest, LastErrorNamesTheFailingRequestUntilOneSucceeds) {
  auto metrics = std::make_shared<prom::PrometheusRegistry>();
  auto registry = metrics->registry_ptr();
  FactoryOptions fo;
  fo.registry = metrics;
  fo.reflector.backoff.initial = 2 * testing::kEnvInitialEventsTimeout;  // held until advanced
  fo.reflector.backoff.max = fo.reflector.backoff.initial;
  fo.reflector.backoff.jitter = 0;
  Env env(fo);
  client::Error forbidden = testing::api_error(403, "Forbidden");
  forbidden.message =
      R"(pods is forbidden: User "restricted" cannot list resource "pods" in API group "" in the namespace "ns")";
  env.fake->add_list(forbidden);
  auto& inf = env.factory->informer(testing::test_type());
  EXPECT_FALSE(inf.last_error().has_value());
  env.factory->start();
  ASSERT_TRUE(env.clock->wait_held());  // backing off after the first failure
  auto first = inf.last_error();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->verb, "list");
  EXPECT_EQ(first->reason, "forbidden");
  EXPECT_EQ(first->consecutive, 1u);
  EXPECT_EQ(first->error.http_status, 403);
  EXPECT_EQ(first->to_string(),
            "list forbidden (1 in a row): api 403 Forbidden: " + forbidden.message);
  EXPECT_FALSE(inf.has_synced());
  std::map<std::string, std::string> l{{"resource", "pods"}};
  auto with = [&](std::map<std::string, std::string> extra) {
    auto m = l;
    m.insert(extra.begin(), extra.end());
    return m;
  };
  EXPECT_EQ(metric(*registry, "kinformer_requests_total", with({{"verb", "list"}})), 1);
  EXPECT_EQ(metric(*registry, "kinformer_request_errors_total",
                   with({{"verb", "list"}, {"reason", "forbidden"}})),
            1);

  env.fake->add_list(testing::api_error(401, "Unauthorized"));
  env.clock->advance(fo.reflector.backoff.initial);
  ASSERT_TRUE(env.fake->wait_lists(2));
  ASSERT_TRUE(testing::eventually([&] {
    auto e = inf.last_error();
    return e && e->consecutive == 2;
  }));
  EXPECT_EQ(inf.last_error()->reason, "unauthorized");
  EXPECT_FALSE(inf.has_synced());
  EXPECT_EQ(metric(*registry, "kinformer_request_errors_total",
                   with({{"verb", "list"}, {"reason", "unauthorized"}})),
            1);
  EXPECT_EQ(metric(*registry, "kinformer_request_errors_total",
                   with({{"verb", "list"}, {"reason", "forbidden"}})),
            1);

  // The permission comes back: the next retry lists, syncs and clears the error.
  env.fake->add_list({make_object("ns", "a", "1")}, "10");
  auto w = env.fake->add_watch();
  ASSERT_TRUE(testing::eventually([&] { return env.clock->sleeps().size() >= 2; }));
  env.clock->advance(fo.reflector.backoff.initial);
  ASSERT_TRUE(inf.wait_for_sync(std::chrono::seconds(20)));
  ASSERT_TRUE(env.fake->wait_watches(1));
  EXPECT_TRUE(testing::eventually([&] { return !inf.last_error().has_value(); }));
  EXPECT_EQ(metric(*registry, "kinformer_requests_total", with({{"verb", "list"}})), 3);
  EXPECT_TRUE(testing::eventually([&] {
    return metric(*registry, "kinformer_requests_total", with({{"verb", "watch"}})) == 1;
  }));
}

// A failing watch opening is reported too, and its count restarts after a success.
TEST(SharedInformerTest, LastErrorReportsAFailedWatchOpeningAndCountsInARow) {
  FactoryOptions fo;
  fo.reflector.backoff.initial = 2 * testing::kEnvInitialEventsTimeout;
  fo.reflector.backoff.max = fo.reflector.backoff.initial;
  fo.reflector.backoff.jitter = 0;
  Env env(fo);
  env.fake->add_list({make_object("ns", "a", "1")}, "10");
  env.fake->add_watch_error(client::Error::make(client::Errc::network, "connection refused"));
  auto& inf = env.factory->informer(testing::test_type());
  env.factory->start();
  ASSERT_TRUE(env.clock->wait_held());
  auto e = inf.last_error();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->verb, "watch");
  EXPECT_EQ(e->reason, "network");
  EXPECT_EQ(e->consecutive, 1u) << "the list before it succeeded";
  EXPECT_TRUE(inf.has_synced());
  env.fake->add_watch();
  env.clock->advance(fo.reflector.backoff.initial);
  ASSERT_TRUE(env.fake->wait_watches(2));
  EXPECT_TRUE(testing::eventually([&] { return !inf.last_error().has_value(); }));
}

}  // namespace
}  // namespace kinformer::informer
