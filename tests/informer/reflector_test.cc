// Protocol behaviour of the reflector, driven through InformerFactory over a scripted
// FakeListerWatcher.
#include "kinformer/informer/reflector.h"

#include <algorithm>
#include <future>
#include <map>
#include <mutex>
#include <sstream>

#include <gtest/gtest.h>

#include "log_capture.h"
#include "test_env.h"

namespace kinformer::informer {
namespace {

using client::EventType;
using testing::api_error;
using testing::bookmark;
using testing::Env;
using testing::event;
using testing::make_object;
using testing::RecordingHandler;

TEST(ReflectorTest, FirstListAtRvZeroPaginatedThenWatchFromListRv) {
  Env env;
  env.fake->add_list({make_object("ns", "a", "5")}, "10", "c1");
  env.fake->add_list({make_object("ns", "b", "6")}, "10", "");
  auto& inf = env.factory->informer(testing::test_type(), testing::selector_options("app=x"));
  env.factory->start();
  ASSERT_TRUE(env.factory->wait_for_cache_sync(testing::kDeadline));
  ASSERT_TRUE(env.fake->wait_watches(1));
  auto lists = env.fake->list_calls();
  ASSERT_EQ(lists.size(), 2u);
  EXPECT_EQ(lists[0].resource_version, std::optional<std::string>("0"));
  EXPECT_EQ(lists[0].limit, 500);
  EXPECT_EQ(lists[0].continue_token, "");
  EXPECT_EQ(lists[0].label_selector, "app=x");
  EXPECT_FALSE(lists[1].resource_version.has_value()) << "continuation must omit resourceVersion";
  EXPECT_EQ(lists[1].continue_token, "c1");
  EXPECT_EQ(inf.store().size(), 2u);
  auto w = env.fake->watch_calls()[0];
  EXPECT_EQ(w.resource_version, std::optional<std::string>("10"));
  EXPECT_TRUE(w.allow_watch_bookmarks);
  EXPECT_GE(w.timeout_seconds, 300);
  EXPECT_LT(w.timeout_seconds, 600);
  EXPECT_FALSE(w.send_initial_events);
  EXPECT_EQ(inf.last_sync_resource_version(), "10");
}

TEST(ReflectorTest, ExpiredMidWatchRelistsAtLastRvThenUnsetAndTombstonesMissingObjects) {
  Env env;
  env.fake->add_list({make_object("ns", "a", "5"), make_object("ns", "b", "6", {}, "b-last")},
                     "10");
  auto w1 = env.fake->add_watch();
  env.fake->add_list(api_error(410, "Expired"));             // relist at last RV "11" -> 410
  env.fake->add_list({make_object("ns", "a", "12")}, "20");  // relist at "" -> b is gone
  auto& inf = env.factory->informer(testing::test_type());
  auto h1 = std::make_shared<RecordingHandler>();
  auto h2 = std::make_shared<RecordingHandler>();
  auto r1 = inf.add_handler(h1);
  auto r2 = inf.add_handler(h2);
  env.factory->start();
  // Let both handlers see b first (an add and a delete both pending would coalesce to nothing).
  ASSERT_TRUE(h1->wait_for("add ns/b 6 initial"));
  ASSERT_TRUE(h2->wait_for("add ns/b 6 initial"));
  w1->push(event(EventType::modified, make_object("ns", "a", "11")))
      .fail(api_error(410, "Expired"));
  ASSERT_TRUE(h1->wait_for("delete ns/b 6 unknown"));
  ASSERT_TRUE(h2->wait_for("delete ns/b 6 unknown"));
  ASSERT_TRUE(env.fake->wait_watches(2));
  auto lists = env.fake->list_calls();
  ASSERT_EQ(lists.size(), 3u);
  EXPECT_EQ(lists[0].resource_version, std::optional<std::string>("0"));
  EXPECT_EQ(lists[1].resource_version, std::optional<std::string>("11"));
  EXPECT_FALSE(lists[2].resource_version.has_value());
  EXPECT_EQ(inf.store().get("ns/b"), nullptr);
  EXPECT_EQ(inf.store().get("ns/a")->metadata.resource_version, "12");
  EXPECT_EQ(env.fake->watch_calls()[1].resource_version, std::optional<std::string>("20"));
  EXPECT_DOUBLE_EQ(inf.metrics().restarts_expired.value(), 1);
  EXPECT_DOUBLE_EQ(inf.metrics().relists.value(), 1);
  EXPECT_DOUBLE_EQ(inf.metrics().initial_lists.value(), 1);
}

TEST(ReflectorTest, BookmarksAdvanceRvAndCleanEndRewatchesWithoutRelist) {
  Env env;
  env.fake->add_list({}, "10");
  env.fake->add_watch()->push(bookmark("15")).push(bookmark("16")).end();
  env.fake->add_watch()->push(event(EventType::added, make_object("ns", "c", "17"))).end();
  auto& inf = env.factory->informer(testing::test_type());
  env.factory->start();
  ASSERT_TRUE(env.fake->wait_watches(3));
  auto watches = env.fake->watch_calls();
  EXPECT_EQ(watches[1].resource_version, std::optional<std::string>("16"));
  EXPECT_EQ(watches[2].resource_version, std::optional<std::string>("17"));
  EXPECT_EQ(env.fake->list_calls().size(), 1u);
  EXPECT_NE(inf.store().get("ns/c"), nullptr);
  EXPECT_DOUBLE_EQ(inf.metrics().events_bookmark.value(), 2);
  EXPECT_DOUBLE_EQ(inf.metrics().restarts_timeout.value(), 2);
}

TEST(ReflectorTest, TruncatedOrMalformedStreamRewatchesFromLastGoodRvWithoutLosingEvents) {
  Env env;
  env.fake->add_list({}, "10");
  env.fake->add_watch()
      ->push(event(EventType::added, make_object("ns", "c", "12")))
      .fail(client::Error::make(client::Errc::truncated, "stream cut mid-event"));
  env.fake->add_watch()
      ->push(event(EventType::added, make_object("ns", "d", "13")))
      .fail(client::Error::make(client::Errc::decode, "malformed line"));
  auto& inf = env.factory->informer(testing::test_type());
  auto h = std::make_shared<RecordingHandler>();
  auto reg = inf.add_handler(h);
  env.factory->start();
  ASSERT_TRUE(env.fake->wait_watches(3));
  auto watches = env.fake->watch_calls();
  EXPECT_EQ(watches[1].resource_version, std::optional<std::string>("12"));
  EXPECT_EQ(watches[2].resource_version, std::optional<std::string>("13"));
  EXPECT_EQ(env.fake->list_calls().size(), 1u);
  ASSERT_TRUE(h->wait_count(2));
  EXPECT_EQ(h->events(), (std::vector<std::string>{"add ns/c 12", "add ns/d 13"}));
  EXPECT_DOUBLE_EQ(inf.metrics().restarts_error.value(), 2);
  EXPECT_GE(inf.metrics().backoff_waits.value(), 2);
}

TEST(ReflectorTest, TooManyRequestsHonoursRetryAfterAndRewatchesWithoutRelist) {
  Env env;
  env.fake->add_list({}, "10");
  env.fake->add_watch_error(api_error(429, "TooManyRequests", std::chrono::seconds(7)));
  auto w = env.fake->add_watch();
  w->fail(api_error(429, "TooManyRequests", std::chrono::seconds(9)));
  env.factory->informer(testing::test_type());
  env.factory->start();
  ASSERT_TRUE(env.fake->wait_watches(3));
  auto sleeps = env.clock->sleeps();
  ASSERT_GE(sleeps.size(), 2u);
  EXPECT_GE(sleeps[0], std::chrono::seconds(7));
  EXPECT_GE(sleeps[1], std::chrono::seconds(9));
  for (const auto& c : env.fake->watch_calls())
    EXPECT_EQ(c.resource_version, std::optional<std::string>("10"));
  EXPECT_EQ(env.fake->list_calls().size(), 1u);
}

TEST(ReflectorTest, WatchListStreamsInitialStateAndKeepsWatchingOnTheSameStream) {
  Env env;
  auto w = env.fake->add_watch();
  w->push(event(EventType::added, make_object("ns", "a", "3")))
      .push(event(EventType::added, make_object("ns", "b", "4")))
      .push(bookmark("30", true))
      .push(event(EventType::deleted, make_object("ns", "a", "31")))
      .push(event(EventType::added, make_object("ns", "c", "32")));
  auto& inf = env.factory->informer(testing::test_type(), testing::watch_list_options());
  auto h = std::make_shared<RecordingHandler>();
  auto reg = inf.add_handler(h);
  env.factory->start();
  ASSERT_TRUE(h->wait_for("add ns/c 32"));
  // add a (initial) + delete a coalesce to nothing when the handler has not seen the add yet;
  // either way the handler never ends up believing in ns/a.
  EXPECT_TRUE(inf.has_synced());
  EXPECT_TRUE(env.fake->list_calls().empty());
  auto c = env.fake->watch_calls()[0];
  EXPECT_TRUE(c.send_initial_events);
  EXPECT_EQ(c.resource_version_match, "NotOlderThan");
  EXPECT_TRUE(c.allow_watch_bookmarks);
  EXPECT_EQ(env.fake->watch_calls().size(), 1u);
  EXPECT_EQ(inf.store().size(), 2u);
  EXPECT_EQ(inf.store().get("ns/a"), nullptr);
  EXPECT_FALSE(inf.watch_list_fell_back());
}

// Once the initial-events-end bookmark has come, a WatchList stream is a steady watch: its
// failures follow the watch's rules (rewatch from the last RV, or relist after a 410), never
// the initial phase's (a 4xx there would be a refusal and fall back to LIST).
TEST(ReflectorTest, AWatchListStreamFailingAfterItsInitialEventsFollowsTheWatchRules) {
  Env env;
  env.fake->add_watch()
      ->push(event(EventType::added, make_object("ns", "a", "3")))
      .push(bookmark("30", true))
      .push(event(EventType::added, make_object("ns", "b", "31")))
      .fail(api_error(400, "BadRequest"));
  env.fake->add_watch()
      ->push(event(EventType::added, make_object("ns", "c", "32")))
      .fail(api_error(410, "Expired"));
  env.fake->add_watch()
      ->push(event(EventType::added, make_object("ns", "d", "40")))
      .push(bookmark("41", true));
  auto& inf = env.factory->informer(testing::test_type(), testing::watch_list_options());
  auto h = std::make_shared<RecordingHandler>();
  auto reg = inf.add_handler(h);
  env.factory->start();
  ASSERT_TRUE(env.fake->wait_watches(3));
  // The second sync replaced the store (the RV is set just before the replace: wait for both).
  ASSERT_TRUE(testing::eventually([&] {
    return inf.last_sync_resource_version() == "41" && inf.store().size() == 1 &&
           inf.store().get("ns/d") != nullptr;
  }));
  auto watches = env.fake->watch_calls();
  ASSERT_EQ(watches.size(), 3u);
  // The 400 after the bookmark: a rewatch from the last RV, not a LIST and not a new WatchList.
  EXPECT_FALSE(watches[1].send_initial_events);
  EXPECT_EQ(watches[1].resource_version, std::optional<std::string>("31"));
  // The 410: a new sync, as a WatchList again, at the last synced RV.
  EXPECT_TRUE(watches[2].send_initial_events);
  EXPECT_EQ(watches[2].resource_version, std::optional<std::string>("32"));
  EXPECT_TRUE(env.fake->list_calls().empty());
  EXPECT_FALSE(inf.watch_list_fell_back());
  EXPECT_DOUBLE_EQ(inf.metrics().restarts_error.value(), 1);
  EXPECT_DOUBLE_EQ(inf.metrics().restarts_expired.value(), 1);
  EXPECT_DOUBLE_EQ(inf.metrics().watch_list_fallbacks_refused.value(), 0);
  EXPECT_EQ(inf.store().size(), 1u);  // the second sync's state: only ns/d
  EXPECT_NE(inf.store().get("ns/d"), nullptr);
}

// client-go names the informer on every reflector log line; so does kinformer, so that one
// line of a component with fifty informers says which one failed. The lines go to the
// factory's sink, with the cause as the message and the variables as fields.
TEST(ReflectorTest, EveryLogLineGoesToTheFactorysSinkAndNamesTheInformer) {
  testing::LogCapture capture;
  FactoryOptions o;
  o.log = capture.sink();
  Env env(o);
  env.fake->add_list(api_error(500, "InternalError"));
  env.fake->add_list({}, "10");
  env.fake->add_watch()->fail(client::Error::make(client::Errc::truncated, "stream cut mid-event"));
  env.fake->add_watch();
  auto& inf = env.factory->informer(testing::test_type(),
                                    testing::selector_options("app=x", "spec.nodeName=n1"));
  env.factory->start();
  ASSERT_TRUE(env.fake->wait_watches(2));
  env.factory->shutdown();
  auto records = capture.records();
  int reflector_records = 0;
  for (const auto& r : records) {
    if (r.component != "reflector") continue;
    ++reflector_records;
    EXPECT_EQ(r.field("informer"), "pods ns=* labels=app=x fields=spec.nodeName=n1") << r.line();
    EXPECT_EQ(r.field("informer"), inf.key().to_string());
  }
  EXPECT_EQ(reflector_records, 2);
  auto list_failed = capture.with_message("list failed");
  ASSERT_EQ(list_failed.size(), 1u);
  EXPECT_EQ(list_failed[0].level, client::LogLevel::warn);
  EXPECT_NE(list_failed[0].field("error").find("500"), std::string::npos) << list_failed[0].line();
  auto watch_failed = capture.with_message("watch failed, rewatching");
  ASSERT_EQ(watch_failed.size(), 1u);
  EXPECT_EQ(watch_failed[0].field("rv"), "10");
  EXPECT_NE(watch_failed[0].field("error").find("truncated"), std::string::npos)
      << watch_failed[0].line();
}

// A refusal falls back to LIST for that sync only (client-go's rule): the next relist tries
// WatchList again, so a server whose feature gate gets turned on, or a one-off 4xx, does not
// leave the informer on LIST for the rest of the process.
TEST(ReflectorTest, WatchListRefusedFallsBackToListForThatSyncAndTheNextRelistTriesWatchListAgain) {
  Env env;
  env.fake->add_watch_error(api_error(400, "BadRequest"));
  env.fake->add_list({make_object("ns", "a", "3")}, "10");
  env.fake->add_watch()->fail(api_error(410, "Expired"));  // forces a relist
  env.fake->add_watch()
      ->push(event(EventType::added, make_object("ns", "b", "21")))
      .push(bookmark("30", true));
  auto& inf = env.factory->informer(testing::test_type(), testing::watch_list_options());
  auto h = std::make_shared<RecordingHandler>();
  auto reg = inf.add_handler(h);
  env.factory->start();
  ASSERT_TRUE(h->wait_for("add ns/b 21"));
  auto watches = env.fake->watch_calls();
  ASSERT_GE(watches.size(), 3u);
  EXPECT_TRUE(watches[0].send_initial_events);
  EXPECT_FALSE(watches[1].send_initial_events);
  EXPECT_TRUE(watches[2].send_initial_events) << "the relist after a refusal tries WatchList again";
  ASSERT_EQ(env.fake->list_calls().size(), 1u);
  EXPECT_EQ(env.fake->list_calls()[0].resource_version, std::optional<std::string>("0"));
  EXPECT_EQ(inf.last_sync_resource_version(), "30");
  EXPECT_FALSE(inf.watch_list_fell_back()) << "the latest sync was a WatchList";
  EXPECT_DOUBLE_EQ(inf.metrics().watch_list_fallbacks_refused.value(), 1);
  EXPECT_EQ(inf.store().get("ns/a"), nullptr);
}

TEST(ReflectorTest, WatchListEndingBeforeInitialEventsEndFallsBackToList) {
  Env env;
  env.fake->add_watch()->push(event(EventType::added, make_object("ns", "a", "3"))).end();
  env.fake->add_list({make_object("ns", "b", "4")}, "10");
  auto& inf = env.factory->informer(testing::test_type(), testing::watch_list_options());
  env.factory->start();
  ASSERT_TRUE(env.factory->wait_for_cache_sync(testing::kDeadline));
  EXPECT_TRUE(inf.watch_list_fell_back());
  EXPECT_EQ(inf.store().get("ns/a"), nullptr);
  EXPECT_NE(inf.store().get("ns/b"), nullptr);
}

TEST(ReflectorTest, ShutdownCancelsTheOpenWatch) {
  Env env;
  auto w = env.fake->add_watch();
  env.factory->informer(testing::test_type());
  env.factory->start();
  ASSERT_TRUE(w->wait_reader_blocked());  // the reflector is inside next() on the open watch
  env.factory->shutdown();                // returns only because the watch was cancelled
  EXPECT_TRUE(w->cancelled());
  env.factory->shutdown();  // idempotent
}

// A 410 when opening a watch (not mid-stream) also relists, at the last synced RV first.
TEST(ReflectorTest, ExpiredOnOpeningTheWatchRelistsAtTheLastSyncedRv) {
  Env env;
  env.fake->add_list({make_object("ns", "a", "3")}, "10");
  env.fake->add_watch_error(api_error(410, "Expired"));
  env.fake->add_list({make_object("ns", "a", "3"), make_object("ns", "b", "15")}, "20");
  auto w = env.fake->add_watch();
  auto& inf = env.factory->informer(testing::test_type());
  auto h = std::make_shared<RecordingHandler>();
  auto reg = inf.add_handler(h);
  env.factory->start();
  ASSERT_TRUE(env.fake->wait_watches(2));
  ASSERT_TRUE(h->wait_for("add ns/b 15"));
  auto lists = env.fake->list_calls();
  ASSERT_EQ(lists.size(), 2u);
  EXPECT_EQ(lists[1].resource_version, std::optional<std::string>("10"));
  EXPECT_EQ(lists[1].resource_version_match, "NotOlderThan");
  EXPECT_EQ(env.fake->watch_calls()[1].resource_version, std::optional<std::string>("20"));
  EXPECT_EQ(inf.last_sync_resource_version(), "20");
}

// A failing initial list (5xx, then 429) waits with backoff, at least Retry-After, and retries
// the same list (RV "0") until it succeeds.
TEST(ReflectorTest, InitialListFailuresBackOffHonourRetryAfterAndRetry) {
  Env env;
  env.fake->add_list(api_error(500, "InternalError"));
  env.fake->add_list(api_error(429, "TooManyRequests", std::chrono::seconds(7)));
  env.fake->add_list({make_object("ns", "a", "3")}, "10");
  auto& inf = env.factory->informer(testing::test_type());
  env.factory->start();
  ASSERT_TRUE(inf.wait_for_sync(testing::kDeadline));
  auto lists = env.fake->list_calls();
  ASSERT_EQ(lists.size(), 3u);
  for (const auto& l : lists) EXPECT_EQ(l.resource_version, std::optional<std::string>("0"));
  auto sleeps = env.clock->sleeps();
  ASSERT_GE(sleeps.size(), 2u);
  // Backoff with the fixed random 0.5: 1.2 s after the 500; the 429's 7 s beat the 2.4 s step.
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(sleeps[0]),
            std::chrono::milliseconds(1200));
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(sleeps[1]),
            std::chrono::seconds(7));
  EXPECT_NE(inf.store().get("ns/a"), nullptr);
}

// The backoff is injected (FactoryOptions::reflector.make_backoff, one per reflector, as Envoy
// injects its backoff strategy): each failure waits what that backoff says, not the default's
// 1.2 s, 2.4 s.
TEST(ReflectorTest, AnInjectedBackoffDecidesTheWaitAfterEachFailure) {
  struct RecordingBackoff : Backoff {
    std::shared_ptr<std::atomic<int>> calls;
    Clock::Duration next() override { return std::chrono::seconds(3) * ++*calls; }  // 3 s, 6 s, ...
    void reset() override {}
  };
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto made = std::make_shared<std::atomic<int>>(0);
  FactoryOptions o;
  o.reflector.make_backoff = [calls, made] {
    ++*made;
    auto b = std::make_unique<RecordingBackoff>();
    b->calls = calls;
    return b;
  };
  Env env(o);
  env.fake->add_list(api_error(500, "InternalError"));
  env.fake->add_list(client::Error::make(client::Errc::network, "connection reset"));
  env.fake->add_list({make_object("ns", "a", "3")}, "10");
  auto& inf = env.factory->informer(testing::test_type());
  env.factory->start();
  ASSERT_TRUE(inf.wait_for_sync(testing::kDeadline));
  EXPECT_EQ(made->load(), 1);
  EXPECT_EQ(calls->load(), 2);
  auto sleeps = env.clock->sleeps();
  ASSERT_GE(sleeps.size(), 2u);
  EXPECT_EQ(sleeps[0], std::chrono::seconds(3));
  EXPECT_EQ(sleeps[1], std::chrono::seconds(6));
}

TEST(ReflectorTest, ABackoffFactoryReturningNullIsAConfigurationError) {
  FactoryOptions o;
  o.reflector.make_backoff = [] { return BackoffPtr{}; };
  Env env(o);
  EXPECT_THROW(env.factory->informer(testing::test_type()), client::ConfigError);
}

// A sink that keeps the latest state and counts what it is told.
class CountingSink : public ReflectorSink {
 public:
  void on_replace(std::vector<client::ObjectPtr> items, const std::string&) override {
    std::lock_guard lock(mu_);
    ++replaces_;
    size_ = items.size();
    cv_.notify_all();
  }
  void on_event(client::EventType, client::ObjectPtr) override {
    std::lock_guard lock(mu_);
    ++events_;
    cv_.notify_all();
  }
  void on_resource_version(const std::string&) override {}
  bool wait_for(int replaces, int events) {
    std::unique_lock lock(mu_);
    return testing::wait_until(lock, cv_,
                               [&] { return replaces_ >= replaces && events_ >= events; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int replaces_ = 0;
  int events_ = 0;
  std::size_t size_ = 0;
};

ReflectorOptions standalone_options(std::shared_ptr<testing::ManualClock> clock) {
  ReflectorOptions o;
  o.name = "standalone";
  o.clock = std::move(clock);
  o.random = [] { return 0.5; };
  return o;
}

// Each fact goes to the ReflectorMetrics it is given, one call each, in order.
TEST(ReflectorTest, ReportsEachFactToItsMetrics) {
  struct RecordingMetrics : ReflectorMetrics {
    std::mutex mu;
    std::vector<std::string> facts;
    void add(std::string f) {
      std::lock_guard lock(mu);
      facts.push_back(std::move(f));
    }
    void watch_opened() override { add("opened"); }
    void watch_closed() override { add("closed"); }
    void watch_ended(WatchRestartReason r) override {
      add("ended " + std::to_string(static_cast<int>(r)));
    }
    void event(client::EventType t) override {
      add("event " + std::to_string(static_cast<int>(t)));
    }
    void synced(bool initial, double) override {
      add(initial ? "synced initial" : "synced relist");
    }
    void backoff_waited() override { add("waited"); }
    void budget_denied() override { add("denied"); }
    void watch_list_fell_back(WatchListFallback) override { add("fell back"); }
    void contacted() override {}  // every list page, watch and event: see the staleness test
    void stale(bool is_stale) override { add(is_stale ? "stale" : "fresh"); }
  } metrics;
  auto fake = std::make_shared<testing::FakeListerWatcher>();
  fake->add_list({make_object("ns", "a", "5")}, "10");
  fake->add_watch()
      ->push(event(EventType::added, make_object("ns", "b", "11")))
      .fail(api_error(410, "Expired"));
  fake->add_list({make_object("ns", "a", "12")}, "20");
  CountingSink sink;
  auto options = standalone_options(std::make_shared<testing::ManualClock>());
  options.metrics = &metrics;
  Reflector reflector(*fake, sink, options);
  {
    std::jthread run([&](std::stop_token stop) { reflector.run(stop); });
    ASSERT_TRUE(fake->wait_watches(2));
    ASSERT_TRUE(sink.wait_for(2, 1));
  }
  std::lock_guard lock(metrics.mu);
  auto i = [](auto e) { return std::to_string(static_cast<int>(e)); };
  EXPECT_EQ(metrics.facts, (std::vector<std::string>{
                               "synced initial", "opened", "event " + i(EventType::added), "closed",
                               "ended " + i(WatchRestartReason::expired), "synced relist", "opened",
                               "closed", "ended " + i(WatchRestartReason::shutdown)}));
}

// The metrics hear when the view turns stale (no contact for the idle deadline, here through
// watches that fail to open while backoff waits pass), at that moment also in the middle of a
// wait, and when it is fresh again (the next contact); each change once. Mutants
// informer-stale-metric-never-set, informer-stale-metric-after-the-wait.
TEST(ReflectorTest, ReportsTheViewStaleOnceAndFreshAgainAtTheNextContact) {
  auto clock = std::make_shared<testing::ManualClock>();
  struct StaleMetrics : ReflectorMetrics {
    explicit StaleMetrics(testing::ManualClock& c) : clock(c) {}
    testing::ManualClock& clock;
    std::mutex mu;
    std::vector<std::string> changes;
    Clock::TimePoint stale_at{};
    int contacts = 0;
    void watch_opened() override {}
    void watch_closed() override {}
    void watch_ended(WatchRestartReason) override {}
    void event(client::EventType) override {}
    void synced(bool, double) override {}
    void backoff_waited() override {}
    void budget_denied() override {}
    void watch_list_fell_back(WatchListFallback) override {}
    void contacted() override {
      std::lock_guard lock(mu);
      ++contacts;
    }
    void stale(bool is_stale) override {
      std::lock_guard lock(mu);
      changes.push_back(is_stale ? "stale" : "fresh");
      if (is_stale) stale_at = clock.now();
    }
  } metrics(*clock);
  auto fake = std::make_shared<testing::FakeListerWatcher>();
  fake->add_list({make_object("ns", "a", "5")}, "10");
  constexpr int kFailures = 12;  // backoff waits of 0.8 s doubling to 30 s: past 75 s in all
  for (int i = 0; i < kFailures; ++i) {
    fake->add_watch_error(client::Error::make(client::Errc::network, "connection refused"));
  }
  auto w = fake->add_watch();
  CountingSink sink;
  auto options = standalone_options(clock);
  options.metrics = &metrics;
  Reflector reflector(*fake, sink, options);
  const Clock::TimePoint started = clock->now();
  std::jthread run([&](std::stop_token stop) { reflector.run(stop); });
  ASSERT_TRUE(fake->wait_watches(kFailures + 1));
  w->push(event(EventType::added, make_object("ns", "b", "11")));
  ASSERT_TRUE(sink.wait_for(1, 1));
  run = {};
  std::lock_guard lock(metrics.mu);
  EXPECT_EQ(metrics.changes, (std::vector<std::string>{"stale", "fresh"}));
  // The last contact (the list) was at 0: stale just past the 75 s deadline, not at the end of
  // the backoff wait it fell into (the waits add up to 50.4 s, then 80.4 s).
  EXPECT_GT(metrics.stale_at - started, options.watch_idle_timeout);
  EXPECT_LE(metrics.stale_at - started, options.watch_idle_timeout + std::chrono::milliseconds(1));
  EXPECT_GE(metrics.contacts, 3);  // the list, the watch that opened, its event
  EXPECT_GT(clock->now() - started, options.watch_idle_timeout);
}

// Without metrics the reflector reports to the null object: it lists and watches all the same.
TEST(ReflectorTest, WithoutMetricsItReportsNowhereAndWorksTheSame) {
  auto fake = std::make_shared<testing::FakeListerWatcher>();
  fake->add_list({make_object("ns", "a", "5")}, "10");
  fake->add_watch()->push(event(EventType::added, make_object("ns", "b", "11"))).end();
  CountingSink sink;
  Reflector reflector(*fake, sink, standalone_options(std::make_shared<testing::ManualClock>()));
  std::jthread run([&](std::stop_token stop) { reflector.run(stop); });
  ASSERT_TRUE(sink.wait_for(1, 1));
  ASSERT_TRUE(fake->wait_watches(2));  // the clean end rewatched
  EXPECT_EQ(reflector.last_sync_resource_version(), "11");
}

// Clock and random source are defaulted once, by the factory; a reflector without them is a
// configuration error, not a silent second default.
TEST(ReflectorTest, AReflectorWithoutClockOrRandomIsAConfigurationError) {
  testing::FakeListerWatcher fake;
  CountingSink sink;
  auto no_clock = standalone_options(nullptr);
  EXPECT_THROW(Reflector(fake, sink, no_clock), client::ConfigError);
  auto no_random = standalone_options(std::make_shared<testing::ManualClock>());
  no_random.random = nullptr;
  EXPECT_THROW(Reflector(fake, sink, no_random), client::ConfigError);
}

// A transient failure of a WatchList (429, network, timeout) is retried as a WatchList: only a
// refusal falls back to LIST.
TEST(ReflectorTest, WatchListTransientFailuresAreRetriedAsWatchListNotFallenBack) {
  Env env;
  env.fake->add_watch_error(api_error(429, "TooManyRequests", std::chrono::seconds(1)));
  env.fake->add_watch_error(client::Error::make(client::Errc::network, "connection reset"));
  env.fake->add_watch_error(client::Error::make(client::Errc::timeout, "deadline exceeded"));
  env.fake->add_watch()
      ->push(event(EventType::added, make_object("ns", "a", "3")))
      .push(bookmark("30", true));
  auto& inf = env.factory->informer(testing::test_type(), testing::watch_list_options());
  env.factory->start();
  ASSERT_TRUE(inf.wait_for_sync(testing::kDeadline));
  auto watches = env.fake->watch_calls();
  ASSERT_EQ(watches.size(), 4u);
  for (const auto& w : watches) EXPECT_TRUE(w.send_initial_events);
  EXPECT_TRUE(env.fake->list_calls().empty());
  EXPECT_FALSE(inf.watch_list_fell_back());
  EXPECT_NE(inf.store().get("ns/a"), nullptr);
  EXPECT_GE(env.clock->sleeps().size(), 3u);  // each retry waited
}

// Failures of the WatchList stream itself, before its initial events end, are transient too
// when they are network-like (cut, malformed) or server-side (5xx, also on open): retried as a
// WatchList after backoff, never a fallback to LIST.
TEST(ReflectorTest, WatchListStreamFailuresAnd5xxBeforeInitialEventsEndAreRetriedAsWatchList) {
  Env env;
  env.fake->add_watch_error(api_error(503, "ServiceUnavailable"));
  env.fake->add_watch()
      ->push(event(EventType::added, make_object("ns", "a", "3")))
      .fail(client::Error::make(client::Errc::truncated, "stream cut mid-event"));
  env.fake->add_watch()->fail(api_error(500, "InternalError"));
  env.fake->add_watch()
      ->push(event(EventType::added, make_object("ns", "a", "3")))
      .push(bookmark("30", true));
  auto& inf = env.factory->informer(testing::test_type(), testing::watch_list_options());
  env.factory->start();
  ASSERT_TRUE(inf.wait_for_sync(testing::kDeadline));
  auto watches = env.fake->watch_calls();
  ASSERT_EQ(watches.size(), 4u);
  for (const auto& w : watches) EXPECT_TRUE(w.send_initial_events);
  EXPECT_TRUE(env.fake->list_calls().empty());
  EXPECT_FALSE(inf.watch_list_fell_back());
  EXPECT_DOUBLE_EQ(inf.metrics().watch_list_fallbacks_refused.value(), 0);
  EXPECT_GE(env.clock->short_sleeps().size(), 3u);  // each retry backed off
}

// A server that ignores sendInitialEvents streams objects but never the initial-events-end
// bookmark: after watch_list_initial_events_timeout (of the injected clock) the sync falls back
// to LIST, counted in kinformer_watch_list_fallbacks_total{reason="initial_events_timeout"}.
TEST(ReflectorTest, WatchListWithoutInitialEventsEndFallsBackToListAfterTheTimeoutAndCountsIt) {
  testing::LogCapture capture;
  FactoryOptions o;
  o.log = capture.sink();
  Env env(o);
  auto w = env.fake->add_watch();
  w->push(event(EventType::added, make_object("ns", "a", "3")));
  env.fake->add_list({make_object("ns", "b", "4")}, "10");
  auto& inf = env.factory->informer(testing::test_type(), testing::watch_list_options());
  env.factory->start();
  ASSERT_TRUE(w->wait_reader_blocked());  // the ADDED was read; no bookmark comes
  ASSERT_TRUE(env.clock->wait_held());    // the initial-events timer is running
  EXPECT_FALSE(inf.has_synced());
  EXPECT_TRUE(env.fake->list_calls().empty());
  // The first period saw the ADDED: the timer waits another one. The second is silent.
  auto sleeps = env.clock->sleeps().size();
  env.clock->advance(testing::kEnvInitialEventsTimeout);
  ASSERT_TRUE(env.clock->wait_held_since(sleeps));
  EXPECT_FALSE(inf.has_synced());
  EXPECT_TRUE(env.fake->list_calls().empty());
  env.clock->advance(testing::kEnvInitialEventsTimeout);
  ASSERT_TRUE(inf.wait_for_sync(testing::kDeadline));
  EXPECT_TRUE(w->cancelled()) << "the stalled WatchList stream is cancelled";
  ASSERT_EQ(env.fake->list_calls().size(), 1u);
  EXPECT_EQ(env.fake->list_calls()[0].resource_version, std::optional<std::string>("0"));
  EXPECT_EQ(inf.store().get("ns/a"), nullptr);
  EXPECT_NE(inf.store().get("ns/b"), nullptr);
  EXPECT_TRUE(inf.watch_list_fell_back());
  EXPECT_DOUBLE_EQ(inf.metrics().watch_list_fallbacks_timeout.value(), 1);
  ASSERT_TRUE(env.fake->wait_watches(2));
  EXPECT_FALSE(env.fake->watch_calls()[1].send_initial_events);
  EXPECT_EQ(env.fake->watch_calls()[1].resource_version, std::optional<std::string>("10"));
  env.factory->shutdown();
  auto fallbacks = capture.with_message("WatchList failed, falling back to LIST for this sync");
  ASSERT_EQ(fallbacks.size(), 1u);
  EXPECT_EQ(fallbacks[0].field("reason"),
            "no k8s.io/initial-events-end bookmark: no event for 3600000 ms")
      << "the idle limit fired";
}

// A large cache that keeps streaming its initial events for longer than the idle limit is not
// cut by it: each period that saw an event starts another, so the sync completes as a WatchList.
TEST(ReflectorTest, WatchListInitialEventsThatKeepComingOutlastTheIdleLimit) {
  informer::FactoryOptions o;
  o.reflector.watch_list_initial_events_deadline = 10 * testing::kEnvInitialEventsTimeout;
  Env env(o);
  auto w = env.fake->add_watch();
  auto& inf = env.factory->informer(testing::test_type(), testing::watch_list_options());
  env.factory->start();
  ASSERT_TRUE(env.clock->wait_held());  // the initial-events timer is running
  for (int i = 0; i < 4; ++i) {         // four idle periods, each with an event
    w->push(event(EventType::added, make_object("ns", "p" + std::to_string(i), "3")));
    ASSERT_TRUE(w->wait_reader_blocked());
    auto sleeps = env.clock->sleeps().size();
    env.clock->advance(testing::kEnvInitialEventsTimeout);
    ASSERT_TRUE(env.clock->wait_held_since(sleeps)) << "period " << i;
  }
  EXPECT_FALSE(inf.has_synced());
  w->push(bookmark("20", true));
  ASSERT_TRUE(inf.wait_for_sync(testing::kDeadline));
  EXPECT_FALSE(inf.watch_list_fell_back());
  EXPECT_TRUE(env.fake->list_calls().empty());
  EXPECT_EQ(inf.store().size(), 4u);
  EXPECT_DOUBLE_EQ(inf.metrics().watch_list_fallbacks_timeout.value(), 0);
}

// A server that ignores sendInitialEvents on a busy cluster streams changes forever and never
// goes idle: the total limit ends the attempt, and the sync falls back to LIST.
TEST(ReflectorTest, WatchListInitialEventsThatNeverEndFallBackAtTheTotalDeadline) {
  testing::LogCapture capture;
  informer::FactoryOptions o;
  o.log = capture.sink();
  o.reflector.watch_list_initial_events_deadline = 3 * testing::kEnvInitialEventsTimeout;
  Env env(o);
  auto w = env.fake->add_watch();
  env.fake->add_list({make_object("ns", "b", "4")}, "10");
  auto& inf = env.factory->informer(testing::test_type(), testing::watch_list_options());
  env.factory->start();
  ASSERT_TRUE(env.clock->wait_held());
  for (int i = 0; i < 2; ++i) {
    w->push(event(EventType::added, make_object("ns", "p" + std::to_string(i), "3")));
    ASSERT_TRUE(w->wait_reader_blocked());
    auto sleeps = env.clock->sleeps().size();
    env.clock->advance(testing::kEnvInitialEventsTimeout);
    ASSERT_TRUE(env.clock->wait_held_since(sleeps)) << "period " << i;
    EXPECT_TRUE(env.fake->list_calls().empty()) << "period " << i;
  }
  w->push(event(EventType::added, make_object("ns", "p2", "3")));  // still busy at the deadline
  ASSERT_TRUE(w->wait_reader_blocked());
  env.clock->advance(testing::kEnvInitialEventsTimeout);
  ASSERT_TRUE(inf.wait_for_sync(testing::kDeadline));
  EXPECT_TRUE(w->cancelled());
  ASSERT_EQ(env.fake->list_calls().size(), 1u);
  EXPECT_TRUE(inf.watch_list_fell_back());
  EXPECT_NE(inf.store().get("ns/b"), nullptr);
  EXPECT_EQ(inf.store().get("ns/p0"), nullptr);
  EXPECT_DOUBLE_EQ(inf.metrics().watch_list_fallbacks_timeout.value(), 1);
  env.factory->shutdown();
  auto fallbacks = capture.with_message("WatchList failed, falling back to LIST for this sync");
  ASSERT_EQ(fallbacks.size(), 1u);
  EXPECT_EQ(fallbacks[0].field("reason"),
            "no k8s.io/initial-events-end bookmark: not within 10800000 ms")
      << "the total limit fired, not the idle one";
}

// Too large resource version (e.g. after an etcd restore the server is behind the client's RV):
// the last RV is unusable, so the next list is a consistent read (RV unset), as after a 410 on
// a list; rewatching or relisting at the old RV would fail forever while has_synced() stays true.
TEST(ReflectorTest, TooLargeRvOnTheWatchRelistsAtUnsetRv) {
  Env env;
  env.fake->add_list({make_object("ns", "a", "5")}, "10");
  env.fake->add_watch()->fail(testing::too_large_rv_error());
  env.fake->add_list({make_object("ns", "b", "6")}, "8");
  auto w2 = env.fake->add_watch();
  auto& inf = env.factory->informer(testing::test_type());
  env.factory->start();
  ASSERT_TRUE(env.fake->wait_watches(2));
  auto lists = env.fake->list_calls();
  ASSERT_EQ(lists.size(), 2u);
  EXPECT_FALSE(lists[1].resource_version.has_value()) << "consistent read";
  EXPECT_EQ(lists[1].limit, 500);
  EXPECT_EQ(env.fake->watch_calls()[1].resource_version, std::optional<std::string>("8"));
  EXPECT_EQ(inf.last_sync_resource_version(), "8");
  EXPECT_NE(inf.store().get("ns/b"), nullptr);
  EXPECT_EQ(inf.store().get("ns/a"), nullptr);
}

TEST(ReflectorTest, TooLargeRvOnOpeningTheWatchRelistsAtUnsetRv) {
  Env env;
  env.fake->add_list({make_object("ns", "a", "5")}, "10");
  env.fake->add_watch_error(testing::too_large_rv_error());
  env.fake->add_list({make_object("ns", "a", "5")}, "8");
  auto& inf = env.factory->informer(testing::test_type());
  env.factory->start();
  ASSERT_TRUE(env.fake->wait_watches(2));
  auto lists = env.fake->list_calls();
  ASSERT_EQ(lists.size(), 2u);
  EXPECT_FALSE(lists[1].resource_version.has_value());
  EXPECT_EQ(env.fake->watch_calls()[1].resource_version, std::optional<std::string>("8"));
  EXPECT_EQ(inf.last_sync_resource_version(), "8");
}

TEST(ReflectorTest, TooLargeRvOnARelistRetriesTheListAtUnsetRv) {
  Env env;
  env.fake->add_list({make_object("ns", "a", "5")}, "10");
  env.fake->add_watch()->fail(api_error(410, "Expired"));
  env.fake->add_list(testing::too_large_rv_error());  // relist at "10"
  env.fake->add_list({make_object("ns", "b", "6")}, "8");
  auto& inf = env.factory->informer(testing::test_type());
  env.factory->start();
  ASSERT_TRUE(env.fake->wait_watches(2));
  auto lists = env.fake->list_calls();
  ASSERT_EQ(lists.size(), 3u);
  EXPECT_EQ(lists[1].resource_version, std::optional<std::string>("10"));
  EXPECT_FALSE(lists[2].resource_version.has_value()) << "a too-large RV is not retried";
  EXPECT_EQ(env.fake->watch_calls()[1].resource_version, std::optional<std::string>("8"));
  EXPECT_NE(inf.store().get("ns/b"), nullptr);
  auto sleeps = env.clock->short_sleeps();
  ASSERT_FALSE(sleeps.empty());
  EXPECT_GE(sleeps.back(), std::chrono::seconds(1)) << "Retry-After of the 504 honoured";
}

// A plain 504 Timeout (retry-after, but no ResourceVersionTooLarge cause) is a transient error:
// rewatch from the last RV, no relist.
TEST(ReflectorTest, Plain504TimeoutOnTheWatchRewatchesFromTheLastRv) {
  Env env;
  env.fake->add_list({}, "10");
  env.fake->add_watch()->fail(api_error(504, "Timeout", std::chrono::seconds(1)));
  env.factory->informer(testing::test_type());
  env.factory->start();
  ASSERT_TRUE(env.fake->wait_watches(2));
  EXPECT_EQ(env.fake->watch_calls()[1].resource_version, std::optional<std::string>("10"));
  EXPECT_EQ(env.fake->list_calls().size(), 1u);
}

// Issue 10, the restart seen by 50 informers of one factory: every open watch breaks (network),
// each rewatch from the old resourceVersion gets 410 (the new server's watch cache starts after
// it), and each informer relists. That is two budget reservations per informer (the retry
// after the failure and the relist), 100 in all: the budget sized by the informers holds them
// at once, so no informer waits for it (with the fixed burst of 10 before, 90 waited, the
// last ~45 s). No backoff here, so the clock does not move and only the budget could delay.
TEST(ReflectorTest, FiftyInformersRecoverFromARestartWithoutWaitingForTheBudget) {
  constexpr int kInformers = 50;
  FactoryOptions fo;
  fo.reflector.backoff.initial = std::chrono::milliseconds(0);
  Env env(fo);
  for (int i = 0; i < kInformers; ++i) {
    env.fake->add_watch()->fail(client::Error::make(client::Errc::network, "connection reset"));
  }
  for (int i = 0; i < kInformers; ++i) env.fake->add_watch_error(api_error(410, "Expired"));
  std::vector<SharedInformer*> informers;
  for (int i = 0; i < kInformers; ++i) {
    InformerOptions o;
    o.namespace_ = "storm-" + std::to_string(i);
    informers.push_back(&env.factory->informer(testing::test_type(), o));
  }
  EXPECT_EQ(env.factory->reconnect_budget().informers(), static_cast<std::size_t>(kInformers));
  env.factory->start();
  ASSERT_TRUE(env.fake->wait_lists(2 * kInformers));  // the initial lists and one relist each
  ASSERT_TRUE(env.fake->wait_watches(3 * kInformers));
  double relists = 0;
  ASSERT_TRUE(testing::eventually([&] {
    relists = 0;
    for (auto* inf : informers) relists += inf->metrics().relists.value();
    return relists == kInformers;
  }));
  EXPECT_EQ(env.factory->reconnect_budget().denials(), 0u);
  double denied = 0;
  for (auto* inf : informers) denied += inf->metrics().budget_denials.value();
  EXPECT_EQ(denied, 0);
  EXPECT_TRUE(env.clock->short_sleeps().empty()) << "nobody waited";
}

// The bound for one informer whose server fails every request, with no backoff at all (the
// worst case): its reconnects are held to its share of the budget, burst_per_informer at once
// and then per_second_per_informer. 30 failures then take (30 - 2) / 0.5 = 56 s of the
// injected clock, in waits of 2 s.
TEST(ReflectorTest, AServerFailingEveryRequestGetsNoMoreThanTheInformersShareOfTheBudget) {
  FactoryOptions fo;
  fo.reflector.backoff.initial = std::chrono::milliseconds(0);
  fo.budget = {
      .burst = 0, .per_second = 0, .burst_per_informer = 2, .per_second_per_informer = 0.5};
  Env env(fo);
  constexpr int kFailures = 30;
  env.fake->add_list({}, "10");
  for (int i = 0; i < kFailures; ++i)
    env.fake->add_watch_error(api_error(503, "ServiceUnavailable"));
  auto last = env.fake->add_watch();  // the server is back: stays open
  const auto t0 = env.clock->now();
  env.factory->informer(testing::test_type());
  env.factory->start();
  ASSERT_TRUE(last->wait_reader_blocked());
  ASSERT_EQ(env.fake->watch_calls().size(), static_cast<std::size_t>(kFailures + 1));
  EXPECT_EQ(env.clock->now() - t0, std::chrono::seconds(56));
  auto sleeps = env.clock->short_sleeps();
  ASSERT_EQ(sleeps.size(), static_cast<std::size_t>(kFailures - 2));
  for (auto d : sleeps) EXPECT_EQ(d, std::chrono::seconds(2));
  EXPECT_EQ(env.factory->reconnect_budget().denials(), static_cast<std::uint64_t>(kFailures - 2));
}

// A watch that ends cleanly at once having delivered nothing (a proxy or aggregated API server
// closing watches immediately) is an error: back off, then relist. Without this the reflector
// rewatched at the reconnect budget's full rate forever.
TEST(ReflectorTest, WatchesEndingAtOnceWithoutEventsBackOffAndRelistInsteadOfHotLooping) {
  Env env;
  env.fake->add_list({make_object("ns", "a", "5")}, "10");
  constexpr int kShort = 4;
  for (int i = 0; i < kShort; ++i) env.fake->add_watch()->end();
  env.fake->set_default_list({make_object("ns", "a", "5")}, "10");
  auto last = env.fake->add_watch();  // stays open
  auto& inf = env.factory->informer(testing::test_type());
  env.factory->start();
  ASSERT_TRUE(last->wait_reader_blocked());
  EXPECT_EQ(env.fake->watch_calls().size(), static_cast<std::size_t>(kShort + 1));
  ASSERT_EQ(env.fake->list_calls().size(), static_cast<std::size_t>(kShort + 1))
      << "a relist after each";
  for (const auto& l : env.fake->list_calls()) EXPECT_EQ(l.limit, 500);
  // Backoff with the fixed random 0.5: 1.2 s, 2.4 s, 4.8 s, 9.6 s.
  auto sleeps = env.clock->short_sleeps();
  ASSERT_EQ(sleeps.size(), static_cast<std::size_t>(kShort));
  for (int i = 0; i < kShort; ++i) {
    EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(sleeps[i]),
              std::chrono::milliseconds(1200 << i));
  }
  EXPECT_DOUBLE_EQ(inf.metrics().restarts_error.value(), kShort);
  EXPECT_DOUBLE_EQ(inf.metrics().restarts_timeout.value(), 0);
  EXPECT_DOUBLE_EQ(inf.metrics().relists.value(), kShort);
}

// The threshold is on the injected clock: a watch that stayed open for min_watch_duration and
// then ended cleanly, even without events, is a normal end: rewatch at once, no relist.
TEST(ReflectorTest, AQuietWatchThatLastedASecondEndsCleanlyAndRewatchesWithoutRelist) {
  Env env;
  env.fake->add_list({}, "10");
  auto w = env.fake->add_watch();
  auto& inf = env.factory->informer(testing::test_type());
  env.factory->start();
  ASSERT_TRUE(w->wait_reader_blocked());
  env.clock->advance(std::chrono::seconds(1));
  w->end();
  ASSERT_TRUE(env.fake->wait_watches(2));
  EXPECT_EQ(env.fake->watch_calls()[1].resource_version, std::optional<std::string>("10"));
  EXPECT_EQ(env.fake->list_calls().size(), 1u);
  EXPECT_TRUE(env.clock->short_sleeps().empty()) << "no backoff";
  EXPECT_DOUBLE_EQ(inf.metrics().restarts_timeout.value(), 1);
}

// Servers that ignore `limit` at RV "0" (served from the watch cache) answer the first list in
// one piece; beyond max_response_bytes it fails with Errc::too_large, every time. Fall back to a
// consistent list (RV unset) with limit, which etcd paginates.
TEST(ReflectorTest, InitialListTooLargeAtRvZeroFallsBackToAPaginatedConsistentList) {
  Env env;
  env.fake->add_list(client::Error::make(
      client::Errc::too_large, "list: response body exceeds max_response_bytes (268435456 bytes)"));
  env.fake->add_list({make_object("ns", "a", "5")}, "10", "c1");
  env.fake->add_list({make_object("ns", "b", "6")}, "10");
  auto& inf = env.factory->informer(testing::test_type());
  env.factory->start();
  ASSERT_TRUE(inf.wait_for_sync(testing::kDeadline));
  auto lists = env.fake->list_calls();
  ASSERT_EQ(lists.size(), 3u);
  EXPECT_EQ(lists[0].resource_version, std::optional<std::string>("0"));
  EXPECT_FALSE(lists[1].resource_version.has_value()) << "consistent read";
  EXPECT_EQ(lists[1].resource_version_match, "");
  EXPECT_EQ(lists[1].limit, 500);
  EXPECT_EQ(lists[1].continue_token, "");
  EXPECT_FALSE(lists[2].resource_version.has_value());
  EXPECT_EQ(lists[2].continue_token, "c1");
  EXPECT_EQ(inf.store().size(), 2u);
  EXPECT_EQ(inf.last_sync_resource_version(), "10");
}

// A sink that records, in order, what it is told, one line per call.
class BatchRecordingSink : public ReflectorSink {
 public:
  void on_replace(std::vector<client::ObjectPtr> items, const std::string& rv) override {
    record("replace " + std::to_string(items.size()) + " @" + rv);
  }
  void on_event(client::EventType, client::ObjectPtr o) override { record("event " + o->key()); }
  void on_events(std::span<client::WatchEvent> events) override {
    std::string line = "events";
    for (const auto& e : events) line += " " + e.object->key();
    record(std::move(line));
  }
  void on_resource_version(const std::string& rv) override { record("rv " + rv); }
  std::vector<std::string> calls() {
    std::lock_guard lock(mu_);
    return calls_;
  }
  bool wait_for_calls(std::size_t n) {
    std::unique_lock lock(mu_);
    return testing::wait_until(lock, cv_, [&] { return calls_.size() >= n; });
  }

 private:
  void record(std::string line) {
    std::lock_guard lock(mu_);
    calls_.push_back(std::move(line));
    cv_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> calls_;
};

// Events the stream has already received go to the sink together (one store update and one
// hand-off per batch); a bookmark ends a batch, and so does the stream running dry. The
// resourceVersion is the last handed-over event's.
TEST(ReflectorTest, BufferedWatchEventsReachTheSinkAsOneBatchUntilABookmarkOrTheStreamRunsDry) {
  auto fake = std::make_shared<testing::FakeListerWatcher>();
  fake->add_list({make_object("ns", "a", "5")}, "10");
  auto w = fake->add_watch();
  w->push(event(EventType::added, make_object("ns", "b", "11")))
      .push(event(EventType::added, make_object("ns", "c", "12")))
      .push(event(EventType::modified, make_object("ns", "a", "13")))
      .push(bookmark("14"))
      .push(event(EventType::deleted, make_object("ns", "b", "15")));
  BatchRecordingSink sink;
  Reflector reflector(*fake, sink, standalone_options(std::make_shared<testing::ManualClock>()));
  std::jthread run([&](std::stop_token stop) { reflector.run(stop); });
  ASSERT_TRUE(sink.wait_for_calls(4));
  EXPECT_EQ(sink.calls(), (std::vector<std::string>{"replace 1 @10", "events ns/b ns/c ns/a",
                                                    "rv 14", "events ns/b"}));
  EXPECT_TRUE(testing::eventually([&] { return reflector.last_sync_resource_version() == "15"; }));
  // A later event alone (the stream had nothing else): a batch of one.
  ASSERT_TRUE(w->wait_reader_blocked());
  w->push(event(EventType::added, make_object("ns", "d", "16")));
  ASSERT_TRUE(sink.wait_for_calls(5));
  EXPECT_EQ(sink.calls().back(), "events ns/d");
  EXPECT_TRUE(testing::eventually([&] { return reflector.last_sync_resource_version() == "16"; }));
}

// A batch is bounded: a longer run of buffered events goes out in batches of kMaxEventBatch.
TEST(ReflectorTest, ALongRunOfBufferedEventsIsSplitIntoBoundedBatches) {
  auto fake = std::make_shared<testing::FakeListerWatcher>();
  fake->add_list({}, "10");
  auto w = fake->add_watch();
  const std::size_t n = Reflector::kMaxEventBatch + 44;
  for (std::size_t i = 0; i < n; ++i) {
    w->push(event(EventType::added,
                  make_object("ns", "o" + std::to_string(i), std::to_string(11 + i))));
  }
  BatchRecordingSink sink;
  Reflector reflector(*fake, sink, standalone_options(std::make_shared<testing::ManualClock>()));
  std::jthread run([&](std::stop_token stop) { reflector.run(stop); });
  ASSERT_TRUE(sink.wait_for_calls(3));
  auto calls = sink.calls();
  auto count = [](const std::string& line) {
    return static_cast<std::size_t>(std::count(line.begin(), line.end(), ' '));
  };
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(count(calls[1]), Reflector::kMaxEventBatch);
  EXPECT_EQ(count(calls[2]), 44u);
  EXPECT_TRUE(testing::eventually(
      [&] { return reflector.last_sync_resource_version() == std::to_string(10 + n); }));
}

// Replays a handler's callbacks ("add K RV[ initial]", "update K OLD->NEW", "delete K RV") into
// the view they build. A callback that does not follow from the view so far (a delete or an
// update of a state the handler did not have, a second add) is described in `error`.
std::map<std::string, std::string> replay(const std::vector<std::string>& callbacks,
                                          std::string& error) {
  std::map<std::string, std::string> view;
  std::string all;
  for (const auto& e : callbacks) all += e + "; ";
  for (const auto& e : callbacks) {
    std::istringstream in(e);
    std::string verb;
    std::string key;
    std::string rv;
    in >> verb >> key >> rv;
    if (verb == "delete") {
      if (view.erase(key) != 1) error += "a delete of an object the handler did not have: ";
    } else if (verb == "update") {
      auto arrow = rv.find("->");
      if (arrow == std::string::npos || view[key] != rv.substr(0, arrow)) {
        error += "an update from a state not seen: ";
      } else {
        view[key] = rv.substr(arrow + 2);
      }
    } else {
      if (view.count(key) != 0) error += "a second add: ";
      view[key] = rv;
    }
    if (!error.empty()) {
      error += e + " in " + all;
      break;
    }
  }
  return view;
}

// The informer applies a batch in order, for the store and for every handler: all the events
// below are buffered before the informer starts, so they arrive as one batch (the tests above
// show the batching), and several changes of one key in it coalesce by the usual rules. The
// handler's view (its callbacks applied in order) ends equal to the store, which ends at the
// last state and resourceVersion.
TEST(ReflectorTest, AnInformerAppliesABatchOfEventsInOrderToTheStoreAndItsHandlers) {
  Env env;
  env.fake->add_list({make_object("ns", "a", "5")}, "10");
  env.fake->add_watch()
      ->push(event(EventType::modified, make_object("ns", "a", "11")))
      .push(event(EventType::added, make_object("ns", "b", "12")))
      .push(event(EventType::modified, make_object("ns", "a", "13")))
      .push(event(EventType::deleted, make_object("ns", "b", "14")))
      .push(event(EventType::added, make_object("ns", "c", "15")));
  auto& inf = env.factory->informer(testing::test_type());
  auto h = std::make_shared<RecordingHandler>();
  auto reg = inf.add_handler(h);
  env.factory->start();
  ASSERT_TRUE(testing::eventually([&] { return inf.store().resource_version() == "15"; }));
  ASSERT_TRUE(h->wait_for("add ns/c 15")) << "the last change reaches the handler";
  EXPECT_EQ(inf.store().size(), 2u);
  ASSERT_NE(inf.store().get("ns/a"), nullptr);
  EXPECT_EQ(inf.store().get("ns/a")->metadata.resource_version, "13");
  EXPECT_EQ(inf.store().get("ns/b"), nullptr);
  ASSERT_NE(inf.store().get("ns/c"), nullptr);
  std::string error;
  auto view = replay(h->events(), error);
  EXPECT_EQ(error, "");
  EXPECT_EQ(view, (std::map<std::string, std::string>{{"ns/a", "13"}, {"ns/c", "15"}}));
}

// The same promise when the batch is applied in parts (1,024 handlers: parts of 4 events), with
// an object added in the first part and deleted in the second: every handler's replayed view
// ends equal to the store, and the store at the last state and resourceVersion.
TEST(ReflectorTest, ABatchAppliedInPartsKeepsEveryHandlersViewEqualToTheStore) {
  constexpr std::size_t kHandlers = 1024;
  static_assert(SharedInformer::kMaxHandOff / kHandlers == 4, "the script below splits at 4");
  Env env;
  env.fake->add_list({make_object("ns", "a", "5")}, "10");
  env.fake->add_watch()
      ->push(event(EventType::modified, make_object("ns", "a", "11")))
      .push(event(EventType::added, make_object("ns", "b", "12")))
      .push(event(EventType::modified, make_object("ns", "a", "13")))
      .push(event(EventType::added, make_object("ns", "d", "14")))
      .push(event(EventType::deleted, make_object("ns", "b", "15")))  // the second part
      .push(event(EventType::added, make_object("ns", "c", "16")))
      .push(event(EventType::modified, make_object("ns", "d", "17")));
  auto& inf = env.factory->informer(testing::test_type());
  std::vector<std::shared_ptr<RecordingHandler>> handlers;
  std::vector<Registration> regs;
  for (std::size_t i = 0; i < kHandlers; ++i) {
    handlers.push_back(std::make_shared<RecordingHandler>());
    regs.push_back(inf.add_handler(handlers.back()));
  }
  env.factory->start();
  ASSERT_TRUE(testing::eventually([&] { return inf.store().resource_version() == "17"; }));
  // Each handler's last callback for ns/c and ns/d (coalescing may merge d's add and update).
  for (const auto& h : handlers) {
    ASSERT_TRUE(testing::eventually([&] {
      auto ev = h->events();
      auto has = [&](const std::string& e) {
        return std::find(ev.begin(), ev.end(), e) != ev.end();
      };
      return has("add ns/c 16") && (has("update ns/d 14->17") || has("add ns/d 17"));
    }));
  }
  EXPECT_EQ(inf.store().size(), 3u);
  EXPECT_EQ(inf.store().get("ns/b"), nullptr);
  const std::map<std::string, std::string> want{{"ns/a", "13"}, {"ns/c", "16"}, {"ns/d", "17"}};
  for (const auto& [key, rv] : want) {
    ASSERT_NE(inf.store().get(key), nullptr) << key;
    EXPECT_EQ(inf.store().get(key)->metadata.resource_version, rv) << key;
  }
  for (std::size_t i = 0; i < kHandlers; ++i) {
    std::string error;
    auto view = replay(handlers[i]->events(), error);
    ASSERT_EQ(error, "") << "handler " << i;
    ASSERT_EQ(view, want) << "handler " << i;
  }
}

// With many handlers a batch of buffered events is applied in parts of at most
// SharedInformer::kMaxHandOff notifications, each part handed to every handler before the next is
// taken, so the first event of a long batch does not wait for the hand-off of the whole batch.
// Observed from the transform (called per event, before its part's store update): when it sees
// the first event of a part, the previous parts are already in a (blocked) handler's queue.
TEST(ReflectorTest, ABatchForManyHandlersIsHandedOffInBoundedParts) {
  constexpr std::size_t kHandlers = 1024;
  constexpr std::size_t kPart = SharedInformer::kMaxHandOff / kHandlers;
  static_assert(kPart >= 2 && 3 * kPart < Reflector::kMaxEventBatch);
  constexpr std::size_t kEvents = 3 * kPart;  // one batch of the reflector, three parts
  // Declared before the factory, which may call the transform until it is destroyed.
  std::mutex mu;
  std::vector<std::size_t> depth_seen;  // guarded by mu: handler 0's queue at each transform
  std::atomic<Registration*> probe{nullptr};
  Env env;
  env.fake->add_list({}, "10");
  auto w = env.fake->add_watch();
  for (std::size_t i = 0; i < kEvents; ++i) {
    w->push(event(EventType::added,
                  make_object("ns", "o" + std::to_string(i), std::to_string(11 + i))));
  }
  InformerOptions opts;
  opts.transform = cache::Transform{"probe", [&](client::ObjectPtr o) -> client::ObjectPtr {
                                      Registration* r = probe.load();
                                      std::lock_guard lock(mu);
                                      depth_seen.push_back(r != nullptr ? r->queue_depth() : 0);
                                      return o;
                                    }};
  auto& inf = env.factory->informer(testing::test_type(), opts);
  // Handler 0 blocks in its first callback, so what it was handed stays in its queue.
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  auto blocked = std::make_shared<RecordingHandler>();
  blocked->hook = [released](const std::string&) { released.wait(); };
  std::vector<Registration> regs;
  regs.reserve(kHandlers);
  regs.push_back(inf.add_handler(blocked));
  std::vector<std::shared_ptr<RecordingHandler>> others;
  for (std::size_t i = 1; i < kHandlers; ++i) {
    others.push_back(std::make_shared<RecordingHandler>());
    regs.push_back(inf.add_handler(others.back()));
  }
  probe.store(&regs.front());
  env.factory->start();
  const std::string last =
      "add ns/o" + std::to_string(kEvents - 1) + " " + std::to_string(11 + kEvents - 1);
  bool all = testing::eventually([&] {
    return std::all_of(others.begin(), others.end(),
                       [&](const auto& h) { return h->events().size() == kEvents; });
  });
  std::vector<std::size_t> seen;
  {
    std::lock_guard lock(mu);
    seen = depth_seen;
  }
  probe.store(nullptr);  // regs go before the factory
  release.set_value();
  ASSERT_TRUE(all) << "every other handler receives every event while handler 0 is blocked";
  EXPECT_EQ(others.back()->events().back(), last);
  ASSERT_EQ(seen.size(), kEvents);
  std::string trace;
  for (std::size_t d : seen) trace += std::to_string(d) + " ";
  for (std::size_t part = 1; part < 3; ++part) {
    // The part's events are queued, but for the one handler 0 may already be blocked in.
    EXPECT_GE(seen[part * kPart], part * kPart - 1)
        << "part " << part << " was transformed before the previous parts were handed off; "
        << "queue depths at each transform: " << trace;
  }
  EXPECT_EQ(seen[0], 0u) << trace;
}

}  // namespace
}  // namespace kinformer::informer
