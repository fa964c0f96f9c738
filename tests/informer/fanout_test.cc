// Fan-out on the bounded handler pool: threads are O(pool), stuck handlers beyond the
// pool size do not stop the others, close() stops a batch already taken, handlers closing each
// other never deadlock, and a late handler sees each object exactly once while events flow.
#include <atomic>
#include <condition_variable>
#include <latch>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "kinformer/client/io_runtime.h"
#include "process_threads.h"
#include "test_env.h"

namespace kinformer::informer {
namespace {

using namespace std::chrono_literals;
using client::EventType;
using testing::event;
using testing::make_object;

FactoryOptions pool_of(std::size_t threads, std::chrono::milliseconds threshold = 200ms) {
  FactoryOptions o;
  o.executor.threads = threads;
  o.executor.blocking_threshold = threshold;
  o.executor.max_extra_threads = 16;
  return o;
}

// Counts callbacks; thread-safe.
struct CountingHandler : ResourceEventHandler {
  std::atomic<int> adds{0};
  std::atomic<int> others{0};
  void on_add(const client::ObjectPtr&, bool) override { ++adds; }
  void on_update(const client::ObjectPtr&, const client::ObjectPtr&) override { ++others; }
  void on_delete(const client::ObjectPtr&, bool) override { ++others; }
};

TEST(FanOut, ThreadsAreBoundedByThePoolNotByTheHandlerCount) {
  std::size_t before = testing::process_threads();
  testing::Env env(pool_of(2));
  std::vector<client::ObjectPtr> objects;
  for (int i = 0; i < 50; ++i) objects.push_back(make_object("ns", "o" + std::to_string(i), "1"));
  env.fake->add_list(objects, "10");
  auto& inf = env.factory->informer(testing::test_type());
  std::vector<std::shared_ptr<CountingHandler>> handlers;
  std::vector<Registration> regs;
  for (int i = 0; i < 500; ++i) {
    handlers.push_back(std::make_shared<CountingHandler>());
    regs.push_back(inf.add_handler(handlers.back()));
  }
  env.factory->start();
  for (auto& h : handlers) ASSERT_TRUE(testing::eventually([&] { return h->adds.load() == 50; }));
  for (auto& r : regs) EXPECT_TRUE(testing::eventually([&] { return r.has_synced(); }));
  EXPECT_LE(env.factory->executor().thread_count(), 3u);  // 2 workers + the monitor
  // The pool and its monitor, the runtime the reflector runs on, and the blocking pool's threads
  // that serve this fake source (its list, and its stream, which cannot say when it is ready):
  // a constant, not 500.
  EXPECT_LE(testing::process_threads(), before + 3 + client::IoRuntime::default_threads() + 2);
}

TEST(FanOut, MoreStuckHandlersThanPoolThreadsDoNotStopTheOthers) {
  testing::Env env(pool_of(2, 20ms));
  env.fake->add_list({make_object("ns", "a", "1")}, "10");
  auto w = env.fake->add_watch();
  auto& inf = env.factory->informer(testing::test_type());
  std::latch release(1);
  std::atomic<int> stuck_entered{0};
  std::vector<Registration> regs;
  for (int i = 0; i < 4; ++i) {
    auto stuck = std::make_shared<ResourceEventHandlerFuncs>();
    stuck->add = [&](const client::ObjectPtr&, bool) {
      ++stuck_entered;
      release.wait();
    };
    regs.push_back(inf.add_handler(stuck));
  }
  std::vector<std::shared_ptr<testing::RecordingHandler>> fine;
  for (int i = 0; i < 10; ++i) {
    fine.push_back(std::make_shared<testing::RecordingHandler>());
    regs.push_back(inf.add_handler(fine.back()));
  }
  env.factory->start();
  ASSERT_TRUE(testing::eventually([&] { return stuck_entered.load() == 4; }))
      << "every stuck handler got a worker: the pool compensated for the blocked ones";
  for (int i = 0; i < 20; ++i) {
    w->push(event(EventType::added,
                  make_object("ns", "e" + std::to_string(i), std::to_string(11 + i))));
  }
  for (auto& h : fine) EXPECT_TRUE(h->wait_for("add ns/e19 30"));
  EXPECT_GE(env.factory->executor().blocked_workers(), 2u);
  release.count_down();
}

// Factories sharing one pool (ClusterRegistry's remote clusters): a stuck handler of one
// factory is compensated like on a pool of its own, so another factory's handlers go on.
TEST(FanOut, AStuckHandlerOfOneFactoryDoesNotStopAnotherOnTheSharedPool) {
  HandlerExecutorOptions pool_options;
  pool_options.threads = 1;
  pool_options.blocking_threshold = 20ms;
  pool_options.max_extra_threads = 2;
  auto pool = std::make_shared<HandlerExecutor>(pool_options);
  FactoryOptions shared;
  shared.shared_executor = pool;
  testing::Env a(shared), b(shared);
  a.fake->add_list({make_object("ns", "a", "1")}, "10");
  b.fake->add_list({make_object("ns", "b", "1")}, "10");
  auto b_watch = b.fake->add_watch();
  std::latch release(1);
  std::atomic<bool> stuck{false};
  auto stuck_handler = std::make_shared<ResourceEventHandlerFuncs>();
  stuck_handler->add = [&](const client::ObjectPtr&, bool) {
    stuck = true;
    release.wait();
  };
  auto ra = a.factory->informer(testing::test_type()).add_handler(stuck_handler);
  auto seen = std::make_shared<testing::RecordingHandler>();
  auto rb = b.factory->informer(testing::test_type()).add_handler(seen);
  a.factory->start();
  ASSERT_TRUE(testing::eventually([&] { return stuck.load(); }));
  b.factory->start();
  EXPECT_TRUE(seen->wait_for("add ns/b 1 initial")) << "the other factory's handler ran";
  EXPECT_EQ(&a.factory->executor(), &b.factory->executor());
  release.count_down();
  a.factory->shutdown();
  b_watch->push(event(EventType::added, make_object("ns", "c", "11")));
  EXPECT_TRUE(seen->wait_for("add ns/c 11"))
      << "a factory's shutdown leaves the shared pool running";
}

// A flood on one factory delays another factory's handlers by one bounded batch, not by the
// whole flood: strands take turns on the shared pool (one thread, no compensation here).
TEST(FanOut, AFloodOnOneFactoryDelaysAnotherByABatchNotByTheFlood) {
  HandlerExecutorOptions pool_options;
  pool_options.threads = 1;
  pool_options.blocking_threshold = std::chrono::hours(1);
  pool_options.max_extra_threads = 0;
  auto pool = std::make_shared<HandlerExecutor>(pool_options);
  FactoryOptions shared;
  shared.shared_executor = pool;
  testing::Env a(shared), b(shared);
  constexpr int kFlood = 5000;
  std::vector<client::ObjectPtr> flood;
  for (int i = 0; i < kFlood; ++i) flood.push_back(make_object("ns", "a" + std::to_string(i), "1"));
  a.fake->add_list(flood, "10");
  b.fake->add_list({make_object("ns", "b", "1")}, "10");
  std::latch gate(1);
  std::atomic<int> a_calls{0};
  std::atomic<int> a_calls_when_b_ran{-1};
  auto a_handler = std::make_shared<ResourceEventHandlerFuncs>();
  a_handler->add = [&](const client::ObjectPtr&, bool) {
    if (a_calls.fetch_add(1) == 0) gate.wait();  // holds the pool until b's work is queued
  };
  auto b_handler = std::make_shared<ResourceEventHandlerFuncs>();
  b_handler->add = [&](const client::ObjectPtr&, bool) {
    int expected = -1;
    a_calls_when_b_ran.compare_exchange_strong(expected, a_calls.load());
  };
  auto& a_informer = a.factory->informer(testing::test_type());
  auto& b_informer = b.factory->informer(testing::test_type());
  auto ra = a_informer.add_handler(a_handler);
  auto rb = b_informer.add_handler(b_handler);
  a.factory->start();
  ASSERT_TRUE(testing::eventually([&] { return a_calls.load() == 1; }));
  b.factory->start();
  // b's add is queued at its handler (its strand is woken right after): the store's sync alone
  // comes before that.
  ASSERT_TRUE(testing::eventually([&] { return rb.queue_depth() >= 1; }));
  gate.count_down();
  ASSERT_TRUE(testing::eventually([&] { return a_calls_when_b_ran.load() >= 0; }));
  EXPECT_LT(a_calls_when_b_ran.load(), kFlood / 4)
      << "b waited for most of a's flood instead of one batch";
  EXPECT_TRUE(testing::eventually([&] { return a_calls.load() == kFlood; }));
}

TEST(FanOut, CloseFromInsideACallbackStopsTheRestOfTheBatch) {
  testing::Env env;
  std::vector<client::ObjectPtr> objects;
  for (int i = 0; i < 5; ++i) objects.push_back(make_object("ns", "o" + std::to_string(i), "1"));
  env.fake->add_list(objects, "10");
  auto& inf = env.factory->informer(testing::test_type());
  std::atomic<int> calls{0};
  Registration reg;
  auto h = std::make_shared<ResourceEventHandlerFuncs>();
  h->add = [&](const client::ObjectPtr&, bool) {
    ++calls;
    reg.close();
  };
  reg = inf.add_handler(h);
  auto other = std::make_shared<CountingHandler>();
  auto oreg = inf.add_handler(other);
  env.factory->start();
  ASSERT_TRUE(testing::eventually([&] { return other->adds.load() == 5; }));
  env.factory->shutdown();  // every handler joined: nothing is on its way
  EXPECT_EQ(calls.load(), 1);
}

// Two handlers that close each other's registration from their callbacks at the same time:
// neither waits for the other for ever (each is blocked in close(), so the other stops waiting).
TEST(FanOut, MutualCloseFromCallbacksDoesNotDeadlock) {
  testing::Env env(pool_of(2));
  env.fake->add_list({make_object("ns", "a", "1")}, "10");
  auto& inf = env.factory->informer(testing::test_type());
  Registration ra;
  Registration rb;
  std::latch both_inside(2);
  std::atomic<int> returned{0};
  auto a = std::make_shared<ResourceEventHandlerFuncs>();
  a->add = [&](const client::ObjectPtr&, bool) {
    both_inside.arrive_and_wait();
    rb.close();
    ++returned;
  };
  auto b = std::make_shared<ResourceEventHandlerFuncs>();
  b->add = [&](const client::ObjectPtr&, bool) {
    both_inside.arrive_and_wait();
    ra.close();
    ++returned;
  };
  ra = inf.add_handler(a);
  rb = inf.add_handler(b);
  env.factory->start();
  EXPECT_TRUE(testing::eventually([&] { return returned.load() == 2; }));
  EXPECT_EQ(inf.handler_count(), 0u);
}

// A chain of closes: C's callback is slow, B's callback closes C, A's callback closes B. A's
// close(B) returns only once B's callback returned, which waits for C: after close() no callback
// of the closed handler runs. Only a cycle of closes (above) stops waiting.
TEST(FanOut, CloseWaitsForAHandlerThatIsItselfClosingASlowOne) {
  testing::Env env(pool_of(4, 20ms));
  env.fake->add_list({make_object("ns", "a", "1")}, "10");
  auto& inf = env.factory->informer(testing::test_type());
  Registration ra;
  Registration rb;
  Registration rc;
  std::latch c_inside(1);
  std::latch release_c(1);
  std::latch b_closing(1);
  std::mutex mu;
  std::condition_variable changed;
  std::vector<std::string> order;
  auto note = [&](const char* what) {
    std::lock_guard lock(mu);
    order.emplace_back(what);
    changed.notify_all();
  };
  auto c = std::make_shared<ResourceEventHandlerFuncs>();
  c->add = [&](const client::ObjectPtr&, bool) {
    c_inside.count_down();
    release_c.wait();
  };
  auto b = std::make_shared<ResourceEventHandlerFuncs>();
  b->add = [&](const client::ObjectPtr&, bool) {
    c_inside.wait();
    b_closing.count_down();
    rc.close();
    note("B returned");
  };
  auto a = std::make_shared<ResourceEventHandlerFuncs>();
  a->add = [&](const client::ObjectPtr&, bool) {
    b_closing.wait();
    rb.close();
    note("A's close(B) returned");
  };
  rc = inf.add_handler(c);
  rb = inf.add_handler(b);
  ra = inf.add_handler(a);
  env.factory->start();
  // Room for a wrong early return of A's close(B) to show (it would come within milliseconds);
  // correct code waits here the whole bound, since nothing returns before C is released.
  std::unique_lock lock(mu);
  changed.wait_for(lock, 500ms, [&] { return !order.empty(); });
  release_c.count_down();
  ASSERT_TRUE(changed.wait_for(lock, testing::kDeadline, [&] { return order.size() == 2; }));
  EXPECT_EQ(order, (std::vector<std::string>{"B returned", "A's close(B) returned"}));
}

// Events flow while a handler registers: it sees every object exactly once, as an initial add
// (in its snapshot) or as a later notification, never both, never neither.
// A list larger than a fan-out chunk and than the slots a drained queue keeps: each object
// arrives once, and afterwards the queue still coalesces per key, with namespace and name both
// part of the key (ns/o5 and ns2/o5 stay apart).
TEST(FanOut, ListBeyondAChunkThenQueueStillCoalescesPerNamespaceAndName) {
  testing::Env env(pool_of(2));
  constexpr int kObjects = 1000;
  std::vector<client::ObjectPtr> objects;
  for (int i = 0; i < kObjects; ++i)
    objects.push_back(make_object("ns", "o" + std::to_string(i), "1"));
  objects.push_back(make_object("ns2", "o5", "1"));
  objects.push_back(make_object("ns", "block", "1"));
  env.fake->add_list(objects, "10");
  auto w = env.fake->add_watch();
  auto& inf = env.factory->informer(testing::test_type());
  std::mutex mu;
  std::map<std::string, int> adds;
  std::vector<std::string> later;  // "kind key old->new" after the list
  std::latch entered(1);
  std::latch release(1);
  auto h = std::make_shared<ResourceEventHandlerFuncs>();
  h->add = [&](const client::ObjectPtr& o, bool initial) {
    std::lock_guard lock(mu);
    if (initial) {
      ++adds[o->key()];
    } else {
      later.push_back("add " + o->key());
    }
  };
  h->update = [&](const client::ObjectPtr& old, const client::ObjectPtr& o) {
    if (o->metadata.name == "block") {
      entered.count_down();
      release.wait();
      return;
    }
    std::lock_guard lock(mu);
    later.push_back("update " + o->key() + " " + old->metadata.resource_version + "->" +
                    o->metadata.resource_version);
  };
  h->del = [&](const client::ObjectPtr& o, bool) {
    std::lock_guard lock(mu);
    later.push_back("delete " + o->key());
  };
  auto reg = inf.add_handler(h);
  env.factory->start();
  ASSERT_TRUE(testing::eventually([&] { return reg.has_synced(); }));
  {
    std::lock_guard lock(mu);
    ASSERT_EQ(adds.size(), static_cast<std::size_t>(kObjects + 2));
    for (const auto& [key, n] : adds) EXPECT_EQ(n, 1) << key;
  }
  w->push(event(EventType::modified, make_object("ns", "block", "11")));
  entered.wait();
  w->push(event(EventType::modified, make_object("ns", "o5", "12")));
  w->push(event(EventType::modified, make_object("ns2", "o5", "13")));
  w->push(event(EventType::modified, make_object("ns", "o5", "14")));
  w->push(event(EventType::deleted, make_object("ns", "o6", "15")));
  w->push(event(EventType::added, make_object("ns", "fresh", "16")));
  w->push(event(EventType::deleted, make_object("ns", "fresh", "17")));
  w->push(event(EventType::added, make_object("ns", "last", "18")));
  ASSERT_TRUE(testing::eventually([&] { return inf.store().get("ns/last") != nullptr; }));
  release.count_down();
  ASSERT_TRUE(testing::eventually([&] {
    std::lock_guard lock(mu);
    return !later.empty() && later.back() == "add ns/last";
  }));
  env.factory->shutdown();
  std::lock_guard lock(mu);
  EXPECT_EQ(later, (std::vector<std::string>{"update ns/o5 1->14", "update ns2/o5 1->13",
                                             "delete ns/o6", "add ns/last"}));
}

TEST(FanOut, LateHandlerWhileEventsFlowSeesEachObjectExactlyOnce) {
  testing::Env env;
  env.fake->add_list({}, "10");
  auto w = env.fake->add_watch();
  auto& inf = env.factory->informer(testing::test_type());
  env.factory->start();
  ASSERT_TRUE(inf.wait_for_sync(testing::kDeadline));
  std::mutex mu;
  std::map<std::string, int> seen;
  auto late = std::make_shared<ResourceEventHandlerFuncs>();
  late->add = [&](const client::ObjectPtr& o, bool) {
    std::lock_guard lock(mu);
    ++seen[o->key()];
  };
  constexpr int kObjects = 2000;
  std::jthread pusher([&] {
    for (int i = 0; i < kObjects; ++i) {
      w->push(event(EventType::added,
                    make_object("ns", "o" + std::to_string(i), std::to_string(11 + i))));
    }
  });
  ASSERT_TRUE(testing::eventually([&] { return inf.store().size() >= kObjects / 4; }));
  auto reg = inf.add_handler(late);
  pusher.join();
  ASSERT_TRUE(testing::eventually([&] {
    std::lock_guard lock(mu);
    return seen.size() == static_cast<std::size_t>(kObjects);
  }));
  env.factory->shutdown();
  std::lock_guard lock(mu);
  for (const auto& [key, n] : seen) EXPECT_EQ(n, 1) << key;
}

}  // namespace
}  // namespace kinformer::informer
