// Registration: every promise of registration.h, and the handler-side promises of
// SharedInformer (add_handler from a callback, resync, transforms on watch events, a stuck handler
// at shutdown).
#include "kinformer/informer/registration.h"

#include <atomic>
#include <latch>
#include <optional>
#include <thread>

#include <gtest/gtest.h>

#include "kinformer/informer/shared_informer.h"
#include "test_env.h"

namespace kinformer::informer {
namespace {

using namespace std::chrono_literals;
using client::EventType;
using testing::Env;
using testing::event;
using testing::make_object;
using testing::RecordingHandler;

// True if `pred` becomes true within `d` (real time, polled). Only for negative checks: a
// promise that holds keeps pred false, and the test then goes on; a broken one flips it fast.
template <typename Pred>
bool becomes_true_within(std::chrono::milliseconds d, Pred pred) {
  auto deadline = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::yield();
  }
  return pred();
}

// A handler whose first callback blocks until released.
class BlockingHandler : public ResourceEventHandler {
 public:
  void on_add(const client::ObjectPtr&, bool) override { block(); }
  void on_update(const client::ObjectPtr&, const client::ObjectPtr&) override { block(); }
  void on_delete(const client::ObjectPtr&, bool) override { block(); }
  void wait_entered() { entered_.wait(); }
  void release() { release_.count_down(); }
  /// Set by the test: true once the close() under test returned.
  std::atomic<bool>* close_returned = nullptr;
  std::atomic<bool> close_returned_while_running{false};
  std::atomic<bool> finished{false};
  std::atomic<int> calls{0};

 private:
  void block() {
    if (++calls > 1) return;
    entered_.count_down();
    release_.wait();
    if (close_returned != nullptr && close_returned->load()) close_returned_while_running = true;
    finished = true;
  }
  std::latch entered_{1};
  std::latch release_{1};
};

TEST(RegistrationTest, CloseFromOutsideWaitsForTheRunningCallback) {
  Env env;
  env.fake->add_list({make_object("ns", "a", "1")}, "10");
  auto& inf = env.factory->informer(testing::test_type());
  auto h = std::make_shared<BlockingHandler>();
  std::atomic<bool> closed{false};
  h->close_returned = &closed;
  auto reg = inf.add_handler(h);
  env.factory->start();
  h->wait_entered();
  std::jthread closer([&] {
    reg.close();
    closed = true;
  });
  ASSERT_TRUE(testing::eventually([&] { return inf.handler_count() == 0; }));  // close() began
  EXPECT_FALSE(becomes_true_within(200ms, [&] { return closed.load(); }))
      << "close() returned while the handler's callback was still running";
  h->release();
  closer.join();
  EXPECT_TRUE(h->finished);
  EXPECT_FALSE(h->close_returned_while_running);
}

// Two threads closing one Registration at once: neither returns while the callback runs.
TEST(RegistrationTest, ConcurrentClosesBothWaitForTheRunningCallback) {
  Env env;
  env.fake->add_list({make_object("ns", "a", "1")}, "10");
  auto& inf = env.factory->informer(testing::test_type());
  auto h = std::make_shared<BlockingHandler>();
  std::atomic<int> returned{0};
  auto reg = inf.add_handler(h);
  env.factory->start();
  h->wait_entered();
  std::latch go(2);
  std::vector<std::jthread> closers;
  for (int i = 0; i < 2; ++i) {
    closers.emplace_back([&] {
      go.arrive_and_wait();
      reg.close();
      ++returned;
    });
  }
  ASSERT_TRUE(testing::eventually([&] { return inf.handler_count() == 0; }));
  EXPECT_FALSE(becomes_true_within(200ms, [&] { return returned.load() > 0; }))
      << "a concurrent close() returned while the callback was still running";
  h->release();
  closers.clear();
  EXPECT_EQ(returned.load(), 2);
  EXPECT_FALSE(reg.active());
}

TEST(RegistrationTest, DestroyingTheRegistrationClosesItAndMoveKeepsItOpen) {
  Env env;
  env.fake->add_list({make_object("ns", "a", "1")}, "10");
  auto w = env.fake->add_watch();
  auto& inf = env.factory->informer(testing::test_type());
  auto h = std::make_shared<RecordingHandler>();
  env.factory->start();
  {
    auto reg = inf.add_handler(h);
    Registration moved = std::move(reg);
    EXPECT_FALSE(reg.active());  // NOLINT(bugprone-use-after-move): moved-from is inactive
    EXPECT_TRUE(moved.active());
    EXPECT_NE(moved.id(), 0u);
    EXPECT_EQ(inf.handler_count(), 1u);
    ASSERT_TRUE(h->wait_for("add ns/a 1 initial"));
  }
  EXPECT_EQ(inf.handler_count(), 0u);
  auto marker = std::make_shared<RecordingHandler>();
  auto mreg = inf.add_handler(marker);
  w->push(event(EventType::added, make_object("ns", "b", "11")));
  ASSERT_TRUE(marker->wait_for("add ns/b 11"));
  EXPECT_EQ(h->events(), (std::vector<std::string>{"add ns/a 1 initial"}));
}

// A handler may register another handler from inside its callback; the new one gets the
// current contents as initial adds and syncs on its own.
TEST(RegistrationTest, AddHandlerFromInsideACallback) {
  Env env;
  env.fake->add_list({make_object("ns", "a", "1"), make_object("ns", "b", "2")}, "10");
  auto w = env.fake->add_watch();
  auto& inf = env.factory->informer(testing::test_type());
  std::mutex mu;
  Registration inner;
  auto second = std::make_shared<RecordingHandler>();
  auto funcs = std::make_shared<ResourceEventHandlerFuncs>();
  funcs->add = [&](const client::ObjectPtr& o, bool) {
    if (o->key() != "ns/c") return;
    std::lock_guard lock(mu);
    inner = inf.add_handler(second);
  };
  auto reg = inf.add_handler(funcs);
  env.factory->start();
  ASSERT_TRUE(inf.wait_for_sync(testing::kDeadline));
  w->push(event(EventType::added, make_object("ns", "c", "11")));
  ASSERT_TRUE(second->wait_count(3));
  auto ev = second->events();
  std::sort(ev.begin(), ev.end());
  EXPECT_EQ(ev, (std::vector<std::string>{"add ns/a 1 initial", "add ns/b 2 initial",
                                          "add ns/c 11 initial"}));
  std::lock_guard lock(mu);
  EXPECT_TRUE(testing::eventually([&] { return inner.has_synced(); }));
  EXPECT_EQ(inf.handler_count(), 2u);
}

// has_synced() of a registration is false while its initial notifications are pending.
TEST(RegistrationTest, HasSyncedWaitsForTheHandlersOwnInitialDeliveries) {
  Env env;
  env.fake->add_list({make_object("ns", "a", "1"), make_object("ns", "b", "2")}, "10");
  auto w = env.fake->add_watch();
  auto& inf = env.factory->informer(testing::test_type());
  auto blocked = std::make_shared<BlockingHandler>();
  auto reg = inf.add_handler(blocked);
  env.factory->start();
  blocked->wait_entered();  // inside the first initial add; the other one is in the same batch
  ASSERT_TRUE(inf.wait_for_sync(testing::kDeadline));
  EXPECT_TRUE(inf.has_synced());
  EXPECT_FALSE(reg.has_synced());
  // A later event reaches the queue while the initial batch is still being delivered: the
  // registration must stay unsynced (the initial notifications are in flight, not pending).
  w->push(event(EventType::added, make_object("ns", "c", "11")));
  ASSERT_TRUE(testing::eventually([&] { return reg.queue_depth() == 2; }));  // b, then c
  EXPECT_FALSE(reg.has_synced());
  blocked->release();
  EXPECT_TRUE(testing::eventually([&] { return reg.has_synced(); }));
  EXPECT_TRUE(testing::eventually([&] { return blocked->calls.load() == 3; }));
}

// Shutdown is bounded: a handler stuck in a callback is given up on after handler_stop_timeout
// and may still return later without harm.
TEST(RegistrationTest, StuckHandlerIsGivenUpOnAtShutdownAfterTheStopTimeout) {
  auto fake = std::make_shared<testing::FakeListerWatcher>();
  fake->add_list({make_object("ns", "a", "1")}, "10");
  FactoryOptions o;
  o.use_watch_list = false;  // scripted as a LIST
  o.clock = std::make_shared<testing::ManualClock>();
  o.random = [] { return 0.5; };
  o.handler_stop_timeout = 50ms;
  InformerFactory factory(
      [fake](const client::ResourceType&, const std::string&) {
        return std::make_unique<testing::ListerWatcherProxy>(fake);
      },
      o);
  auto& inf = factory.informer(testing::test_type());
  auto h = std::make_shared<BlockingHandler>();
  auto reg = inf.add_handler(h);
  factory.start();
  h->wait_entered();
  factory.shutdown();  // returns although the callback is still blocked
  EXPECT_FALSE(h->finished);
  h->release();
  EXPECT_TRUE(testing::eventually([&] { return h->finished.load(); }));
  reg.close();  // after shutdown: a no-op that must not wait for anything
}

TEST(SharedInformerPromises, ResyncRedeliversEveryCachedObjectAsAnUpdate) {
  Env env;
  env.fake->add_list({make_object("ns", "a", "1"), make_object("ns", "b", "2")}, "10");
  InformerOptions opts;
  opts.resync = 30s;
  auto& inf = env.factory->informer(testing::test_type(), opts);
  auto h1 = std::make_shared<RecordingHandler>();
  auto h2 = std::make_shared<RecordingHandler>();
  auto r1 = inf.add_handler(h1);
  auto r2 = inf.add_handler(h2);
  env.factory->start();
  for (auto& h : {h1, h2}) {
    ASSERT_TRUE(h->wait_for("update ns/a 1->1"));
    ASSERT_TRUE(h->wait_for("update ns/b 2->2"));
  }
  bool slept_resync = false;
  for (auto d : env.clock->sleeps()) slept_resync = slept_resync || d == std::chrono::seconds(30);
  EXPECT_TRUE(slept_resync) << "resync runs at its period";
}

TEST(SharedInformerPromises, NoResyncWhenThePeriodIsZero) {
  Env env;
  env.fake->add_list({make_object("ns", "a", "1")}, "10");
  auto w = env.fake->add_watch();
  auto& inf = env.factory->informer(testing::test_type());
  auto h = std::make_shared<RecordingHandler>();
  auto reg = inf.add_handler(h);
  env.factory->start();
  ASSERT_TRUE(h->wait_for("add ns/a 1 initial"));
  w->push(event(EventType::modified, make_object("ns", "a", "2")));
  w->push(event(EventType::added, make_object("ns", "b", "3")));
  ASSERT_TRUE(h->wait_for("add ns/b 3"));
  EXPECT_EQ(h->events(),
            (std::vector<std::string>{"add ns/a 1 initial", "update ns/a 1->2", "add ns/b 3"}));
}

// The transform applies to watch events too (not only lists), and a transform returning null
// drops the object: it is not stored, and an object already stored is removed (deleted).
TEST(SharedInformerPromises, TransformAppliesToWatchEventsAndNullDropsTheObject) {
  Env env;
  env.fake->add_list(
      {make_object("ns", "a", "1", {}, "payload"), make_object("ns", "drop-me", "2")}, "10");
  auto w = env.fake->add_watch();
  cache::Transform t{"strip-and-drop", [](client::ObjectPtr o) -> client::ObjectPtr {
                       if (client::find_value(o->metadata.labels, "drop") != nullptr ||
                           o->metadata.name == "drop-me") {
                         return nullptr;
                       }
                       auto copy = std::make_shared<testing::TestObject>(
                           static_cast<const testing::TestObject&>(*o));
                       copy->payload.clear();
                       return copy;
                     }};
  InformerOptions opts;
  opts.transform = t;
  auto& inf = env.factory->informer(testing::test_type(), opts);
  auto h = std::make_shared<RecordingHandler>();
  auto reg = inf.add_handler(h);
  env.factory->start();
  ASSERT_TRUE(inf.wait_for_sync(testing::kDeadline));
  // Delivered before the watch events, so they cannot coalesce with it.
  ASSERT_TRUE(h->wait_for("add ns/a 1 initial"));
  EXPECT_EQ(inf.store().get("ns/drop-me"), nullptr);
  EXPECT_EQ(inf.store().size(), 1u);
  w->push(event(EventType::added, make_object("ns", "b", "11", {}, "watch payload")));
  w->push(event(EventType::modified, make_object("ns", "a", "12", {{"drop", "yes"}}, "x")));
  w->push(event(EventType::added, make_object("ns", "c", "13", {{"drop", "yes"}})));
  w->push(event(EventType::added, make_object("ns", "z", "14")));
  ASSERT_TRUE(h->wait_for("add ns/z 14"));
  ASSERT_NE(inf.store().get("ns/b"), nullptr);
  EXPECT_EQ(testing::payload_of(inf.store().get("ns/b")), "");
  EXPECT_EQ(inf.store().get("ns/a"), nullptr) << "a modify the transform drops removes the object";
  EXPECT_EQ(inf.store().get("ns/c"), nullptr);
  EXPECT_EQ(h->events(), (std::vector<std::string>{"add ns/a 1 initial", "add ns/b 11",
                                                   "delete ns/a 1", "add ns/z 14"}));
}

}  // namespace
}  // namespace kinformer::informer
