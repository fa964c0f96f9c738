// Controller: informers (a scripted FakeListerWatcher) feed keys to workers calling reconcile.
// Time is a ManualClock of the controller's own: short waits (sync polls, retry delays) return at
// once, the metrics period is held.
#include "kinformer/controller/controller.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "fakes.h"
#include "kinformer/client/error.h"
#include "test_env.h"

namespace kinformer::testing {
namespace {

using namespace std::chrono_literals;
using client::EventType;
using controller::Controller;
using controller::ControllerOptions;

/// Counts reconciles per key; `outcome` decides the result of each call (default: success).
class Reconciles {
 public:
  std::function<client::Status(const std::string&, int call)> outcome;

  controller::Reconciler reconciler() {
    return [this](const std::string& key) -> client::Status {
      int call = 0;
      {
        std::lock_guard lock(mu_);
        call = ++calls_[key];
        order_.push_back(key);
      }
      if (outcome) return outcome(key, call);
      return client::Ok{};
    };
  }
  int calls(const std::string& key) const {
    std::lock_guard lock(mu_);
    auto it = calls_.find(key);
    return it == calls_.end() ? 0 : it->second;
  }
  std::size_t total() const {
    std::lock_guard lock(mu_);
    return order_.size();
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, int> calls_;
  std::vector<std::string> order_;
};

ControllerOptions options(Reconciles& r, std::shared_ptr<ManualClock> clock) {
  ControllerOptions o;
  o.name = "test-controller";
  o.reconcile = r.reconciler();
  o.workers = 2;
  o.clock = std::move(clock);
  o.log = [](const client::LogRecord&) {};
  return o;
}

// Waits of 500 ms or more (the metrics period) hold until advanced; shorter ones pass at once.
std::shared_ptr<ManualClock> controller_clock() { return std::make_shared<ManualClock>(500ms); }

TEST(ControllerTest, ReconcilesEveryListedObjectThenEachChangeIncludingDeletes) {
  Env env;
  env.fake->add_list({make_object("ns", "a", "1"), make_object("ns", "b", "2")}, "10");
  auto w = env.fake->add_watch();
  auto& inf = env.factory->informer(test_type());
  env.factory->start();
  Reconciles r;
  Controller c(options(r, controller_clock()));
  c.watch(inf);
  c.start();
  ASSERT_TRUE(eventually([&] { return r.calls("ns/a") == 1 && r.calls("ns/b") == 1; }));
  EXPECT_TRUE(c.workers_started());
  w->push(event(EventType::modified, make_object("ns", "a", "11")));
  ASSERT_TRUE(eventually([&] { return r.calls("ns/a") == 2; }));
  w->push(event(EventType::deleted, make_object("ns", "b", "12")));
  ASSERT_TRUE(eventually([&] { return r.calls("ns/b") == 2; }));
  w->push(event(EventType::added, make_object("other", "c", "13")));
  ASSERT_TRUE(eventually([&] { return r.calls("other/c") == 1; }));
  c.stop();
  EXPECT_TRUE(c.queue().shutting_down());
  EXPECT_EQ(inf.handler_count(), 0u);  // the handler was closed
}

TEST(ControllerTest, ADeleteMissedWhileCutOffIsQueuedFromItsTombstone) {
  Env env;
  env.fake->add_list({make_object("ns", "a", "1"), make_object("ns", "b", "2")}, "10");
  auto w = env.fake->add_watch();
  // The relist after the watch expired no longer has b: the informer reports a tombstone.
  env.fake->add_list({make_object("ns", "a", "1")}, "20");
  auto& inf = env.factory->informer(test_type());
  env.factory->start();
  Reconciles r;
  Controller c(options(r, controller_clock()));
  c.watch(inf);
  c.start();
  ASSERT_TRUE(eventually([&] { return r.calls("ns/b") == 1; }));
  w->fail(api_error(410, "Expired"));
  ASSERT_TRUE(eventually([&] { return r.calls("ns/b") == 2; }));
  EXPECT_FALSE(inf.store().get("ns/b"));
}

TEST(ControllerTest, KeysMayBeMappedFromTheObject) {
  Env env;
  env.fake->add_list({make_object("ns", "pod-1", "1", {{"app", "web"}})}, "10");
  env.fake->add_watch();
  auto& inf = env.factory->informer(test_type());
  env.factory->start();
  Reconciles r;
  Controller c(options(r, controller_clock()));
  c.watch(inf, [](const client::Object& o) {
    return std::vector<std::string>{"ns/" + *client::find_value(o.metadata.labels, "app")};
  });
  c.start();
  ASSERT_TRUE(eventually([&] { return r.calls("ns/web") == 1; }));
  EXPECT_EQ(r.calls("ns/pod-1"), 0);
}

TEST(ControllerTest, WorkersStartOnlyOnceEveryCacheSynced) {
  Env env;
  env.fake->add_list({make_object("ns", "a", "1")}, "10");
  env.fake->add_watch();
  auto& inf = env.factory->informer(test_type());
  env.factory->start();
  Reconciles r;
  std::atomic<bool> other_synced{false};
  std::atomic<int> polls{0};
  Controller c(options(r, controller_clock()));
  c.watch(inf);
  c.wait_for([&] {
    ++polls;
    return other_synced.load();
  });
  c.queue().add("early");
  c.start();
  // The controller polls: until the other cache synced, no worker runs.
  ASSERT_TRUE(eventually([&] { return polls.load() >= 5; }));
  EXPECT_FALSE(c.workers_started());
  EXPECT_EQ(r.total(), 0u);
  // "early" and ns/a (once the handler has had the initial list) wait for the workers.
  EXPECT_TRUE(eventually([&] { return c.queue().len() == 2u; }));
  EXPECT_EQ(r.total(), 0u);
  other_synced = true;
  ASSERT_TRUE(eventually([&] { return r.calls("early") == 1 && r.calls("ns/a") == 1; }));
  EXPECT_TRUE(c.workers_started());
  EXPECT_THROW(c.wait_for([] { return true; }), std::logic_error);
  EXPECT_THROW(c.run({}), std::logic_error);
}

TEST(ControllerTest, AnErrorOrAnExceptionRetriesWithBackoffAndSuccessForgets) {
  Env env;
  env.fake->add_list({make_object("ns", "a", "1")}, "10");
  env.fake->add_watch();
  auto& inf = env.factory->informer(test_type());
  env.factory->start();
  Reconciles r;
  r.outcome = [&](const std::string&, int call) -> client::Status {
    if (call == 1) return client::Error::make(client::Errc::api, "conflict");
    if (call == 2) throw std::runtime_error("boom");
    return client::Ok{};
  };
  auto clock = controller_clock();
  auto o = options(r, clock);
  o.workers = 1;
  Controller c(std::move(o));
  c.watch(inf);
  c.start();
  ASSERT_TRUE(eventually([&] { return r.calls("ns/a") == 3; }));
  ASSERT_TRUE(eventually([&] { return c.queue().num_requeues("ns/a") == 0; }));  // forgotten
  // The retries waited as the default limiter says: 5 ms, then 10 ms.
  auto sleeps = clock->sleeps();
  EXPECT_NE(std::find(sleeps.begin(), sleeps.end(), 5ms), sleeps.end());
  EXPECT_NE(std::find(sleeps.begin(), sleeps.end(), 10ms), sleeps.end());
}

TEST(ControllerTest, StopWaitsForTheRunningReconcileAndDropsTheRest) {
  Env env;
  env.fake->add_list({make_object("ns", "a", "1")}, "10");
  env.fake->add_watch();
  auto& inf = env.factory->informer(test_type());
  env.factory->start();
  Reconciles r;
  Gate entered;
  Gate release;
  std::atomic<bool> finished{false};
  r.outcome = [&](const std::string& key, int) -> client::Status {
    if (key == "ns/a") {
      entered.open();
      EXPECT_TRUE(release.wait());
      finished = true;
    }
    return client::Ok{};
  };
  auto o = options(r, controller_clock());
  o.workers = 1;
  Controller c(std::move(o));
  c.watch(inf);
  c.start();
  ASSERT_TRUE(entered.wait());
  c.queue().add("queued");  // never handed out: the only worker is busy, then shut down
  std::atomic<bool> stopped{false};
  std::jthread stopper([&] {
    c.stop();
    stopped = true;
  });
  ASSERT_TRUE(eventually([&] { return c.queue().draining(); }));
  EXPECT_FALSE(stopped.load());
  release.open();
  stopper.join();
  EXPECT_TRUE(finished.load());
  EXPECT_EQ(r.calls("queued"), 0);
}

TEST(ControllerTest, RunReturnsWhenItsTokenIsStoppedBeforeTheCachesSynced) {
  Reconciles r;
  Controller c(options(r, controller_clock()));
  c.wait_for([] { return false; });
  std::stop_source stop;
  std::jthread runner([&] { c.run(stop.get_token()); });
  stop.request_stop();
  runner.join();
  EXPECT_FALSE(c.workers_started());
  EXPECT_TRUE(c.queue().shutting_down());
}

TEST(ControllerTest, InvalidOptionsThrowAConfigErrorNamingTheField) {
  Reconciles r;
  const std::vector<std::pair<const char*, std::function<void(ControllerOptions&)>>> cases = {
      {"name", [](auto& o) { o.name.clear(); }},
      {"reconcile", [](auto& o) { o.reconcile = nullptr; }},
      {"workers", [](auto& o) { o.workers = 0; }},
      {"sync_poll_period", [](auto& o) { o.sync_poll_period = 0ms; }},
      {"metrics_period", [](auto& o) { o.metrics_period = -1ms; }},
  };
  for (const auto& [field, edit] : cases) {
    auto o = options(r, controller_clock());
    edit(o);
    try {
      Controller c(std::move(o));
      ADD_FAILURE() << field << ": accepted";
    } catch (const client::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace kinformer::testing
