// A handler's queue (detail::Listener, through SharedInformer::add_handler): a stuck handler
// delays no one, pending notifications coalesce per key, late handlers get the initial state,
// close() from inside and outside a callback, exceptions.
#include <atomic>
#include <latch>
#include <semaphore>
#include <thread>

#include <gtest/gtest.h>

#include "kinformer/informer/shared_informer.h"
#include "test_env.h"

namespace kinformer::informer {
namespace {

using client::EventType;
using testing::Env;
using testing::event;
using testing::make_object;
using testing::RecordingHandler;

TEST(ListenerTest, StuckHandlerDelaysNeitherOtherHandlersNorTheStore) {
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
    w->push(event(EventType::added,
                  make_object("ns", "o" + std::to_string(i), std::to_string(11 + i))));
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

TEST(ListenerTest, CoalescesPendingNotificationsPerKey) {
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
  EXPECT_EQ(h->events(), (std::vector<std::string>{"add ns/a 1 initial", "update ns/a 1->3",
                                                   "add ns/c 7", "add ns/z 8"}));
}

TEST(ListenerTest, LateHandlerGetsInitialAddsAndItsOwnHasSynced) {
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

TEST(ListenerTest, CloseInsideHandlerStopsFurtherCallbacks) {
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

TEST(ListenerTest, CloseFromOutsideWaitsForRunningCallbackAndRemovesOnlyThatHandler) {
  Env env;
  env.fake->add_list({make_object("ns", "a", "1")}, "10");
  auto w = env.fake->add_watch();
  auto& inf = env.factory->informer(testing::test_type());
  auto h1 = std::make_shared<RecordingHandler>();
  auto h2 = std::make_shared<RecordingHandler>();
  auto r1 = inf.add_handler(h1);
  auto r2 = inf.add_handler(h2);
  EXPECT_EQ(inf.handler_count(), 2u);
  EXPECT_DOUBLE_EQ(inf.metrics().handlers.value(), 2);
  env.factory->start();
  ASSERT_TRUE(h1->wait_count(1));
  r1.close();
  EXPECT_FALSE(r1.active());
  std::size_t seen = h1->events().size();
  w->push(event(EventType::added, make_object("ns", "b", "11")));
  ASSERT_TRUE(h2->wait_for("add ns/b 11"));
  EXPECT_EQ(h1->events().size(), seen);
  EXPECT_EQ(inf.handler_count(), 1u);
  EXPECT_DOUBLE_EQ(inf.metrics().handlers.value(), 1);
  r2.close();
  EXPECT_EQ(inf.handler_count(), 0u);
  // The informer keeps running after its last handler left.
  w->push(event(EventType::added, make_object("ns", "c", "12")));
  auto h3 = std::make_shared<RecordingHandler>();
  auto r3 = inf.add_handler(h3);
  ASSERT_TRUE(h3->wait_count(1));
  EXPECT_EQ(env.fake->watch_calls().size(), 1u);
}

TEST(ListenerTest, HandlerExceptionsAreCaughtAndCounted) {
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

}  // namespace
}  // namespace kinformer::informer
