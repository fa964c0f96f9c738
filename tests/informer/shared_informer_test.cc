// Handler fan-out, registrations and the factory.
#include "kinformer/client/dynamic_object.h"
#include "kinformer/informer/shared_informer.h"

#include <atomic>
#include <future>
#include <latch>
#include <thread>
#include <semaphore>

#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include "kinformer/client/error.h"
#include "test_env.h"

namespace kinformer::informer {
namespace {

using client::EventType;
using testing::Env;
using testing::event;
using testing::make_object;
using testing::RecordingHandler;

TEST(SharedInformerTest, StuckHandlerDelaysNeitherOtherHandlersNorTheStore) {
  Env env;
  env.fake->add_list({make_object("ns", "a", "1")}, "10");
  auto w = env.fake->add_watch();
  auto& inf = env.factory->informer(testing::test_type());
  std::latch release(1);
  auto stuck = std::make_shared<RecordingHandler>();
  stuck->hook = [&](const std::string&) { release.wait(); };
  auto fast = std::make_shared<RecordingHandler>();
  auto r1 = inf.add_handler(stuck);
  auto r2 = inf.add_handler(fast);
  env.factory->start();
  for (int i = 0; i < 50; ++i) {
    w->push(event(EventType::added, make_object("ns", "o" + std::to_string(i), std::to_string(11 + i))));
  }
  ASSERT_TRUE(fast->wait_for("add ns/o49 60"));
  EXPECT_EQ(inf.store().size(), 51u);
  // wait_for returns inside the callback; the batch it belongs to is marked synced when it ends.
  EXPECT_TRUE(testing::eventually([&] { return r2.has_synced(); }));
  EXPECT_FALSE(r1.has_synced());
  EXPECT_TRUE(stuck->events().empty());
  EXPECT_GT(r1.queue_depth(), 0u);
  EXPECT_LE(r1.queue_depth(), 51u);  // bounded by the cache size
  release.count_down();
  ASSERT_TRUE(stuck->wait_count(51));
}

TEST(SharedInformerTest, CoalescesPendingNotificationsPerKey) {
  Env env;
  env.fake->add_list({make_object("ns", "a", "1")}, "10");
  auto w = env.fake->add_watch();
  auto& inf = env.factory->informer(testing::test_type());
  std::binary_semaphore gate(0);
  std::latch entered(1);
  auto h = std::make_shared<RecordingHandler>();
  bool first = true;
  h->hook = [&](const std::string&) {
    if (first) {
      first = false;
      entered.count_down();
      gate.acquire();
    }
  };
  auto reg = inf.add_handler(h);
  env.factory->start();
  entered.wait();
  // First delivery (add a initial) blocks; everything below queues behind it.
  w->push(event(EventType::modified, make_object("ns", "a", "2")))
      .push(event(EventType::modified, make_object("ns", "a", "3")))
      .push(event(EventType::added, make_object("ns", "b", "4")))
      .push(event(EventType::deleted, make_object("ns", "b", "5")))
      .push(event(EventType::added, make_object("ns", "c", "6")))
      .push(event(EventType::modified, make_object("ns", "c", "7")));
  // Wait until the reflector applied everything to the store.
  auto marker = std::make_shared<RecordingHandler>();
  auto mreg = inf.add_handler(marker);
  w->push(event(EventType::added, make_object("ns", "z", "8")));
  ASSERT_TRUE(marker->wait_for("add ns/z 8"));
  gate.release();
  ASSERT_TRUE(h->wait_for("add ns/z 8"));
  EXPECT_EQ(h->events(), (std::vector<std::string>{"add ns/a 1 initial", "update ns/a 1->3", "add ns/c 7",
                                                    "add ns/z 8"}));
}

TEST(SharedInformerTest, LateHandlerGetsInitialAddsAndItsOwnHasSynced) {
  Env env;
  env.fake->add_list({make_object("ns", "a", "1"), make_object("ns", "b", "2")}, "10");
  auto& inf = env.factory->informer(testing::test_type());
  env.factory->start();
  ASSERT_TRUE(inf.wait_for_sync(testing::kDeadline));
  auto h = std::make_shared<RecordingHandler>();
  auto reg = inf.add_handler(h);
  ASSERT_TRUE(h->wait_count(2));
  auto ev = h->events();
  std::sort(ev.begin(), ev.end());
  EXPECT_EQ(ev, (std::vector<std::string>{"add ns/a 1 initial", "add ns/b 2 initial"}));
  // has_synced flips right after the last initial delivery returns.
  EXPECT_TRUE(testing::eventually([&] { return reg.has_synced(); }));
}

TEST(SharedInformerTest, CloseInsideHandlerStopsFurtherCallbacks) {
  Env env;
  env.fake->add_list({make_object("ns", "a", "1")}, "10");
  auto w = env.fake->add_watch();
  auto& inf = env.factory->informer(testing::test_type());
  Registration reg;
  std::mutex mu;
  std::condition_variable cv;
  int calls = 0;
  auto funcs = std::make_shared<ResourceEventHandlerFuncs>();
  funcs->add = [&](const client::ObjectPtr&, bool) {
    reg.close();  // from inside: must not deadlock
    reg.close();  // idempotent
    std::lock_guard l(mu);
    ++calls;
    cv.notify_all();
  };
  {
    std::lock_guard l(mu);
    reg = inf.add_handler(funcs);
  }
  auto other = std::make_shared<RecordingHandler>();
  auto oreg = inf.add_handler(other);
  env.factory->start();
  {
    std::unique_lock l(mu);
    ASSERT_TRUE(cv.wait_for(l, testing::kDeadline, [&] { return calls == 1; }));
  }
  w->push(event(EventType::added, make_object("ns", "b", "11")));
  ASSERT_TRUE(other->wait_for("add ns/b 11"));
  EXPECT_EQ(inf.handler_count(), 1u);
  env.factory->shutdown();  // joins every handler: nothing can still be on its way
  std::lock_guard l(mu);
  EXPECT_EQ(calls, 1);
}

TEST(SharedInformerTest, CloseFromOutsideWaitsForRunningCallbackAndRemovesOnlyThatHandler) {
  Env env;
  env.fake->add_list({make_object("ns", "a", "1")}, "10");
  auto w = env.fake->add_watch();
  auto& inf = env.factory->informer(testing::test_type());
  auto h1 = std::make_shared<RecordingHandler>();
  auto h2 = std::make_shared<RecordingHandler>();
  auto r1 = inf.add_handler(h1);
  auto r2 = inf.add_handler(h2);
  EXPECT_EQ(inf.handler_count(), 2u);
  EXPECT_DOUBLE_EQ(inf.metrics().handlers.Value(), 2);
  env.factory->start();
  ASSERT_TRUE(h1->wait_count(1));
  r1.close();
  EXPECT_FALSE(r1.active());
  std::size_t seen = h1->events().size();
  w->push(event(EventType::added, make_object("ns", "b", "11")));
  ASSERT_TRUE(h2->wait_for("add ns/b 11"));
  EXPECT_EQ(h1->events().size(), seen);
  EXPECT_EQ(inf.handler_count(), 1u);
  EXPECT_DOUBLE_EQ(inf.metrics().handlers.Value(), 1);
  r2.close();
  EXPECT_EQ(inf.handler_count(), 0u);
  // The informer keeps running after its last handler left.
  w->push(event(EventType::added, make_object("ns", "c", "12")));
  auto h3 = std::make_shared<RecordingHandler>();
  auto r3 = inf.add_handler(h3);
  ASSERT_TRUE(h3->wait_count(1));
  EXPECT_EQ(env.fake->watch_calls().size(), 1u);
}

TEST(SharedInformerTest, HandlerExceptionsAreCaughtAndCounted) {
  Env env;
  env.fake->add_list({make_object("ns", "a", "1"), make_object("ns", "b", "2")}, "10");
  auto& inf = env.factory->informer(testing::test_type());
  auto h = std::make_shared<RecordingHandler>();
  h->hook = [](const std::string& e) {
    if (e.rfind("add ns/a", 0) == 0) throw std::runtime_error("boom");
  };
  auto reg = inf.add_handler(h);
  env.factory->start();
  ASSERT_TRUE(h->wait_for("add ns/b 2 initial"));
  ASSERT_TRUE(testing::eventually([&] { return reg.has_synced(); }));
  EXPECT_EQ(reg.exceptions(), 1u);
}

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

TEST(InformerFactoryTest, DedupesOnKey) {
  Env env;
  auto& a = env.factory->informer(testing::test_type(), testing::selector_options("app=x,tier"));
  auto& b = env.factory->informer(testing::test_type(), testing::selector_options("tier, app=x"));
  auto& c = env.factory->informer(testing::test_type(), testing::selector_options("app=y"));
  auto& d = env.factory->informer(testing::test_type(), testing::selector_options("app=x,tier", "spec.nodeName=n1"));
  auto& e = env.factory->informer(testing::test_type("secrets"), testing::selector_options("app=x,tier"));
  InformerOptions ns;
  ns.namespace_ = "kube-system";
  auto& f = env.factory->informer(testing::test_type(), ns);
  EXPECT_EQ(&a, &b);
  EXPECT_NE(&a, &c);
  EXPECT_NE(&a, &d);
  EXPECT_NE(&a, &e);
  EXPECT_NE(&a, &f);
  EXPECT_EQ(env.factory->informer_count(), 5u);
  EXPECT_EQ(env.lister_watchers_created.load(), 5);
  EXPECT_THROW(env.factory->informer(testing::test_type(), testing::selector_options("a in (")),
               client::ConfigError);
}

TEST(InformerFactoryTest, TypedAndDynamicRequestsForOneKeyAreAConfigError) {
  Env env;
  auto typed = testing::test_type();  // no codec: the fake lister-watcher hands objects over
  auto dynamic = client::dynamic_resource(typed.gvr);
  env.factory->informer(typed);
  EXPECT_EQ(&env.factory->informer(typed), &env.factory->informer(typed));
  try {
    env.factory->informer(dynamic);
    FAIL() << "a dynamic request for a typed informer's key must not share its objects";
  } catch (const client::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("another object model"), std::string::npos) << e.what();
  }
  EXPECT_EQ(env.factory->informer_count(), 1u);
}

TEST(InformerFactoryTest, HundredComponentsShareOneWatch) {
  Env env;
  env.fake->add_list({make_object("ns", "a", "1")}, "10");
  std::vector<std::shared_ptr<RecordingHandler>> handlers;
  std::vector<Registration> regs;
  env.factory->start();  // informers created after start start at once
  for (int i = 0; i < 100; ++i) {
    auto& inf = env.factory->informer(testing::test_type());
    handlers.push_back(std::make_shared<RecordingHandler>());
    HandlerOptions ho;
    ho.name = "component-" + std::to_string(i);
    regs.push_back(inf.add_handler(handlers.back(), ho));
  }
  ASSERT_TRUE(env.factory->wait_for_cache_sync(testing::kDeadline));
  for (auto& h : handlers) ASSERT_TRUE(h->wait_for("add ns/a 1 initial"));
  ASSERT_TRUE(env.fake->wait_watches(1));
  EXPECT_EQ(env.fake->watch_calls().size(), 1u);
  EXPECT_EQ(env.fake->list_calls().size(), 1u);
  EXPECT_EQ(env.factory->informer_count(), 1u);
  EXPECT_EQ(env.factory->handler_counts().begin()->second, 100u);
}

TEST(InformerFactoryTest, ThousandAddCloseCyclesKeepExactlyOneWatch) {
  Env env;
  env.fake->add_list({make_object("ns", "a", "1")}, "10");
  auto w = env.fake->add_watch();
  env.factory->start();
  for (int i = 0; i < 1000; ++i) {
    auto& inf = env.factory->informer(testing::test_type());
    auto reg = inf.add_handler(std::make_shared<RecordingHandler>());
    if (i % 2 == 0) reg.close();
  }
  auto& inf = env.factory->informer(testing::test_type());
  EXPECT_EQ(inf.handler_count(), 0u);
  auto h = std::make_shared<RecordingHandler>();
  auto reg = inf.add_handler(h);
  w->push(event(EventType::added, make_object("ns", "b", "11")));
  ASSERT_TRUE(h->wait_for("add ns/b 11"));
  EXPECT_EQ(env.fake->watch_calls().size(), 1u);
  EXPECT_EQ(env.factory->informer_count(), 1u);
}

TEST(InformerFactoryTest, ShutdownIsIdempotentAndRegistrationsMayOutliveTheFactory) {
  Registration reg;
  {
    Env env;
    env.fake->add_list({make_object("ns", "a", "1")}, "10");
    auto& inf = env.factory->informer(testing::test_type());
    reg = inf.add_handler(std::make_shared<RecordingHandler>());
    env.factory->start();
    ASSERT_TRUE(env.factory->wait_for_cache_sync(testing::kDeadline));
    env.factory->shutdown();
    env.factory->shutdown();
    EXPECT_THROW(env.factory->informer(testing::test_type("secrets")), client::ConfigError);
  }
  reg.close();
  reg.close();
}

// Reads a metric value back from the registry by family name and label subset.
double metric(prometheus::Registry& r, const std::string& family,
              const std::map<std::string, std::string>& labels) {
  for (const auto& fam : r.Collect()) {
    if (fam.name != family) continue;
    for (const auto& m : fam.metric) {
      bool ok = true;
      for (const auto& [k, v] : labels) {
        bool found = false;
        for (const auto& lp : m.label) found = found || (lp.name == k && lp.value == v);
        ok = ok && found;
      }
      if (!ok) continue;
      switch (fam.type) {
        case prometheus::MetricType::Counter: return m.counter.value;
        case prometheus::MetricType::Gauge: return m.gauge.value;
        case prometheus::MetricType::Histogram: return static_cast<double>(m.histogram.sample_count);
        default: return -1;
      }
    }
  }
  return -1;
}

TEST(MetricsTest, EveryMetricIsReadableFromTheRegistry) {
  auto registry = std::make_shared<prometheus::Registry>();
  FactoryOptions fo;
  fo.registry = registry;
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
  ASSERT_TRUE(testing::eventually([&] { return inf.metrics().restarts_expired.Value() == 1; }));
  std::map<std::string, std::string> l{{"resource", "pods"}, {"selector", selector_hash("app=x", "")}};
  // wait_watches() returns when the watch was asked for; the gauge moves just after it opened.
  ASSERT_TRUE(testing::eventually([&] { return inf.metrics().open_watches.Value() == 1; }));
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
  EXPECT_TRUE(testing::eventually([&] { return metric(*registry, "kinformer_cache_objects", l) == 1; }));
  EXPECT_GT(metric(*registry, "kinformer_last_sync_timestamp_seconds", l), 0);
  EXPECT_GE(metric(*registry, "kinformer_backoff_waits_total", l), 1);
  EXPECT_GE(metric(*registry, "kinformer_reconnect_budget_denials_total", l), 1);
  // Not a WatchList informer: the series exist, at 0 (their counts: ReflectorTest.WatchList*).
  EXPECT_EQ(metric(*registry, "kinformer_watch_list_fallbacks_total", with("reason", "refused")), 0);
  EXPECT_EQ(metric(*registry, "kinformer_watch_list_fallbacks_total", with("reason", "initial_events_timeout")), 0);
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

// Auth faults (issue 10): while lists fail, last_error() names the failing request (verb,
// bounded reason, the server's message, how many in a row) and the failures are counted by
// reason; the informer stays unsynced, and the first request that succeeds clears the error.
// Backoff waits are held on the ManualClock, so each retry happens when the test says so.
TEST(SharedInformerTest, LastErrorNamesTheFailingRequestUntilOneSucceeds) {
  auto registry = std::make_shared<prometheus::Registry>();
  FactoryOptions fo;
  fo.registry = registry;
  fo.backoff.initial = 2 * testing::kEnvInitialEventsTimeout;  // held until advanced
  fo.backoff.max = fo.backoff.initial;
  fo.backoff.jitter = 0;
  Env env(fo);
  client::Error forbidden = testing::api_error(403, "Forbidden");
  forbidden.message = R"(pods is forbidden: User "restricted" cannot list resource "pods" in API group "" in the namespace "ns")";
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
  EXPECT_EQ(first->to_string(), "list forbidden (1 in a row): api 403 Forbidden: " + forbidden.message);
  EXPECT_FALSE(inf.has_synced());
  std::map<std::string, std::string> l{{"resource", "pods"}};
  auto with = [&](std::map<std::string, std::string> extra) {
    auto m = l;
    m.insert(extra.begin(), extra.end());
    return m;
  };
  EXPECT_EQ(metric(*registry, "kinformer_requests_total", with({{"verb", "list"}})), 1);
  EXPECT_EQ(metric(*registry, "kinformer_request_errors_total", with({{"verb", "list"}, {"reason", "forbidden"}})), 1);

  env.fake->add_list(testing::api_error(401, "Unauthorized"));
  env.clock->advance(fo.backoff.initial);
  ASSERT_TRUE(env.fake->wait_lists(2));
  ASSERT_TRUE(testing::eventually([&] {
    auto e = inf.last_error();
    return e && e->consecutive == 2;
  }));
  EXPECT_EQ(inf.last_error()->reason, "unauthorized");
  EXPECT_FALSE(inf.has_synced());
  EXPECT_EQ(metric(*registry, "kinformer_request_errors_total", with({{"verb", "list"}, {"reason", "unauthorized"}})), 1);
  EXPECT_EQ(metric(*registry, "kinformer_request_errors_total", with({{"verb", "list"}, {"reason", "forbidden"}})), 1);

  // The permission comes back: the next retry lists, syncs and clears the error.
  env.fake->add_list({make_object("ns", "a", "1")}, "10");
  auto w = env.fake->add_watch();
  ASSERT_TRUE(testing::eventually([&] { return env.clock->sleeps().size() >= 2; }));
  env.clock->advance(fo.backoff.initial);
  ASSERT_TRUE(inf.wait_for_sync(std::chrono::seconds(20)));
  ASSERT_TRUE(env.fake->wait_watches(1));
  EXPECT_TRUE(testing::eventually([&] { return !inf.last_error().has_value(); }));
  EXPECT_EQ(metric(*registry, "kinformer_requests_total", with({{"verb", "list"}})), 3);
  EXPECT_TRUE(testing::eventually([&] { return metric(*registry, "kinformer_requests_total", with({{"verb", "watch"}})) == 1; }));
}

// A failing watch opening is reported too, and its count restarts after a success.
TEST(SharedInformerTest, LastErrorReportsAFailedWatchOpeningAndCountsInARow) {
  FactoryOptions fo;
  fo.backoff.initial = 2 * testing::kEnvInitialEventsTimeout;
  fo.backoff.max = fo.backoff.initial;
  fo.backoff.jitter = 0;
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
  env.clock->advance(fo.backoff.initial);
  ASSERT_TRUE(env.fake->wait_watches(2));
  EXPECT_TRUE(testing::eventually([&] { return !inf.last_error().has_value(); }));
}

TEST(MetricsTest, HandlerGaugesFollowAStuckHandlerAndInformerGaugesFollowTheCache) {
  auto registry = std::make_shared<prometheus::Registry>();
  FactoryOptions fo;
  fo.registry = registry;
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
  EXPECT_TRUE(testing::eventually(
      [&] { return metric(*registry, "kinformer_handler_queue_depth", hl) == 2; }))
      << "gauge " << metric(*registry, "kinformer_handler_queue_depth", hl) << " registration "
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
  auto registry = std::make_shared<prometheus::Registry>();
  FactoryOptions fo;
  fo.registry = registry;
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

// A list that blocks until released (a LIST is not interruptible by a stop request).
class BlockingLister : public client::ListerWatcher {
 public:
  client::Result<client::ObjectList> list(const client::ListOptions&) override {
    std::unique_lock lock(mu_);
    entered_ = active_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return released_; });
    active_ = false;
    return client::ObjectList{{}, "1", ""};
  }
  client::Result<client::WatchStreamPtr> watch(const client::ListOptions&) override {
    return client::Error::make(client::Errc::network, "no watch");
  }
  bool wait_entered() {
    std::unique_lock lock(mu_);
    return testing::wait_until(lock, cv_, [&] { return entered_; });
  }
  bool active() {
    std::lock_guard lock(mu_);
    return active_;
  }
  void release() {
    std::lock_guard lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool entered_ = false, active_ = false, released_ = false;
};

class ForwardingLister : public client::ListerWatcher {
 public:
  explicit ForwardingLister(std::shared_ptr<client::ListerWatcher> t) : t_(std::move(t)) {}
  client::Result<client::ObjectList> list(const client::ListOptions& o) override { return t_->list(o); }
  client::Result<client::WatchStreamPtr> watch(const client::ListOptions& o) override { return t_->watch(o); }

 private:
  std::shared_ptr<client::ListerWatcher> t_;
};

// shutdown() promises that, on return, every reflector thread is joined; a second caller racing
// a shutdown in progress must not return before that.
TEST(InformerFactoryTest, ConcurrentShutdownReturnsOnlyAfterTheInformersStopped) {
  auto lw = std::make_shared<BlockingLister>();
  InformerFactory factory([lw](const client::ResourceType&, const std::string&) {
    return std::make_unique<ForwardingLister>(lw);
  });
  InformerOptions list_mode;
  list_mode.use_watch_list = false;  // BlockingLister blocks in LIST
  auto& inf = factory.informer(testing::test_type(), list_mode);
  factory.start();
  ASSERT_TRUE(lw->wait_entered());
  std::thread first([&] { factory.shutdown(); });
  bool stopping = !inf.wait_for_sync(testing::kDeadline);  // returns once stop() began
  auto second = std::async(std::launch::async, [&] {
    factory.shutdown();
    return lw->active();
  });
  std::optional<bool> early;
  if (second.wait_for(std::chrono::milliseconds(500)) == std::future_status::ready) early = second.get();
  lw->release();
  bool list_active_at_return = early ? *early : second.get();
  first.join();
  EXPECT_TRUE(stopping);
  EXPECT_FALSE(list_active_at_return) << "a second shutdown() returned while a reflector was still running";
}

}  // namespace
}  // namespace kinformer::informer
