// InformerFactory: one informer per key, one watch per informer, shutdown.
#include "kinformer/informer/informer_factory.h"

#include <atomic>
#include <future>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "kinformer/client/dynamic_object.h"
#include "kinformer/client/error.h"
#include "test_env.h"

namespace kinformer::informer {
namespace {

using client::EventType;
using testing::Env;
using testing::event;
using testing::make_object;
using testing::RecordingHandler;

TEST(InformerFactoryTest, DedupesOnKey) {
  Env env;
  auto& a = env.factory->informer(testing::test_type(), testing::selector_options("app=x,tier"));
  auto& b = env.factory->informer(testing::test_type(), testing::selector_options("tier, app=x"));
  auto& c = env.factory->informer(testing::test_type(), testing::selector_options("app=y"));
  auto& d = env.factory->informer(testing::test_type(),
                                  testing::selector_options("app=x,tier", "spec.nodeName=n1"));
  auto& e =
      env.factory->informer(testing::test_type("secrets"), testing::selector_options("app=x,tier"));
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

// The factory's freshness is its stalest informer's: resyncing with no contact while it has
// none, fresh once they synced, stale past the idle deadline without contact.
TEST(InformerFactoryTest, FreshnessIsTheStalestInformers) {
  Env env;
  EXPECT_EQ(env.factory->freshness().state, Freshness::State::resyncing);
  EXPECT_FALSE(env.factory->freshness().last_contact.has_value());
  env.fake->set_default_list({make_object("ns", "a", "5")}, "10");
  (void)env.factory->informer(testing::test_type());
  (void)env.factory->informer(testing::test_type("secrets"));
  env.factory->start();
  ASSERT_TRUE(env.factory->wait_for_cache_sync(testing::kDeadline));
  ASSERT_TRUE(testing::eventually(
      [&] { return env.factory->freshness().state == Freshness::State::fresh; }));
  env.clock->advance(std::chrono::seconds(80));  // past the 75 s idle deadline
  Freshness f = env.factory->freshness();
  EXPECT_EQ(f.state, Freshness::State::stale);
  EXPECT_GE(f.age, std::chrono::seconds(80));
}

TEST(InformerFactoryTest, ANullClientOrAnEmptyListerWatcherFactoryIsAConfigError) {
  EXPECT_THROW(InformerFactory(std::shared_ptr<client::RestClient>{}), client::ConfigError);
  EXPECT_THROW(InformerFactory(ListerWatcherFactory{}), client::ConfigError);
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
  client::Result<client::ObjectList> list(const client::ListOptions& o) override {
    return t_->list(o);
  }
  client::Result<client::WatchStreamPtr> watch(const client::ListOptions& o) override {
    return t_->watch(o);
  }

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
  if (second.wait_for(std::chrono::milliseconds(500)) == std::future_status::ready)
    early = second.get();
  lw->release();
  bool list_active_at_return = early ? *early : second.get();
  first.join();
  EXPECT_TRUE(stopping);
  EXPECT_FALSE(list_active_at_return)
      << "a second shutdown() returned while a reflector was still running";
}

// A reflector's own callbacks (transforms, sync listeners) run on its loop: a call that would
// wait for that loop (an informer's stop(), the factory's shutdown()) throws a logic_error
// instead. Runs `call` from the factory's sync listener on an informer with one object and an
// open watch; returns once it was refused with a message holding `says`.
struct RefusedFromOwnReflector {
  RefusedFromOwnReflector(const std::function<void(testing::Env&, SharedInformer&)>& call,
                          const std::string& says)
      : w(scripted(env)), inf(env.factory->informer(testing::test_type())) {
    env.factory->on_informer_synced([this, call, says] {
      try {
        call(env, inf);
      } catch (const std::logic_error& e) {
        refused = std::string(e.what()).find(says) != std::string::npos;
      }
    });
    env.factory->start();
  }
  static std::shared_ptr<testing::WatchScript> scripted(testing::Env& env) {
    env.fake->add_list({make_object("ns", "a", "1")}, "10");
    return env.fake->add_watch();
  }
  testing::Env env;
  std::shared_ptr<testing::WatchScript> w;
  SharedInformer& inf;
  std::atomic<bool> refused{false};
};

// stop() says so, the informer goes on, and the factory's shutdown (from the test's thread) stops
// it. Mutant informer-stop-from-own-reflector.
TEST(InformerFactoryTest, StopFromItsOwnReflectorIsRefusedNotAHang) {
  RefusedFromOwnReflector t([](testing::Env&, SharedInformer& inf) { inf.stop(); },
                            "would wait for itself");
  ASSERT_TRUE(testing::eventually([&] { return t.refused.load(); }));
  t.w->push(testing::event(client::EventType::added, make_object("ns", "b", "11")));
  EXPECT_TRUE(testing::eventually([&] { return t.inf.store().size() == 2; })) << "still running";
  auto gone = std::async(std::launch::async, [&] { t.env.factory->shutdown(); });
  EXPECT_EQ(gone.wait_for(testing::kDeadline), std::future_status::ready);
}

// shutdown() is refused before any informer is stopped: the factory keeps running whole, and a
// later shutdown() works. Mutant factory-shutdown-from-own-reflector.
TEST(InformerFactoryTest, ShutdownFromItsOwnReflectorIsRefusedAndStopsNothing) {
  RefusedFromOwnReflector t([](testing::Env& env, SharedInformer&) { env.factory->shutdown(); },
                            "InformerFactory::shutdown()");
  ASSERT_TRUE(testing::eventually([&] { return t.refused.load(); }));
  t.w->push(testing::event(client::EventType::added, make_object("ns", "b", "11")));
  EXPECT_TRUE(testing::eventually([&] { return t.inf.store().size() == 2; })) << "still running";
  auto h = std::make_shared<RecordingHandler>();
  auto reg = t.inf.add_handler(h);
  EXPECT_TRUE(h->wait_count(2)) << "handlers still served";
  EXPECT_NO_THROW((void)t.env.factory->informer(testing::test_type(), {.namespace_ = "other"}))
      << "the factory was left shut down";
  auto gone = std::async(std::launch::async, [&] { t.env.factory->shutdown(); });
  EXPECT_EQ(gone.wait_for(testing::kDeadline), std::future_status::ready);
}

}  // namespace
}  // namespace kinformer::informer
