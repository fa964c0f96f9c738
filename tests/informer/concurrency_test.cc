// Concurrency tests (label "concurrency"): run under TSan in build-informer-tsan.
#include <atomic>
#include <latch>
#include <thread>

#include <gtest/gtest.h>

#include "test_env.h"

namespace kinformer::informer {
namespace {

using client::EventType;
using testing::event;
using testing::make_object;

TEST(InformerConcurrencyTest, RegistrationsChurnWhileEventsFlow) {
  testing::Env env;
  env.fake->add_list({make_object("ns", "a", "1")}, "10");
  auto w = env.fake->add_watch();
  auto& inf = env.factory->informer(testing::test_type());
  env.factory->start();
  std::latch go(5);
  std::vector<std::jthread> threads;
  threads.emplace_back([&] {
    go.arrive_and_wait();
    for (int i = 0; i < 300; ++i) {
      w->push(event(i % 3 == 2 ? EventType::deleted : EventType::added,
                    make_object("ns", "o" + std::to_string(i % 20), std::to_string(100 + i))));
    }
  });
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      go.arrive_and_wait();
      for (int i = 0; i < 50; ++i) {
        auto h = std::make_shared<testing::RecordingHandler>();
        Registration self;
        auto funcs = std::make_shared<ResourceEventHandlerFuncs>();
        auto reg = inf.add_handler(h);
        (void)inf.store().list();
        (void)reg.has_synced();
        if ((i + t) % 3 == 0) reg = Registration();
      }
    });
  }
  threads.clear();
  auto last = std::make_shared<testing::RecordingHandler>();
  auto reg = inf.add_handler(last);
  w->push(event(EventType::added, make_object("ns", "final", "1000")));
  ASSERT_TRUE(last->wait_for("add ns/final 1000"));
  EXPECT_EQ(inf.handler_count(), 1u);
  EXPECT_EQ(env.fake->watch_calls().size(), 1u);
}

TEST(InformerConcurrencyTest, FactoryFromManyThreadsThenShutdown) {
  testing::Env env;
  env.factory->start();
  std::latch go(4);
  std::vector<std::jthread> threads;
  std::vector<Registration> regs[4];
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      go.arrive_and_wait();
      for (int i = 0; i < 30; ++i) {
        auto& inf = env.factory->informer(
            testing::test_type(), testing::selector_options("shard=" + std::to_string(i % 3)));
        regs[t].push_back(inf.add_handler(std::make_shared<testing::RecordingHandler>()));
        (void)env.factory->informer_count();
        (void)env.factory->handler_counts();
      }
    });
  }
  threads.clear();
  EXPECT_EQ(env.factory->informer_count(), 3u);
  ASSERT_TRUE(env.factory->wait_for_cache_sync(testing::kDeadline));
  ASSERT_TRUE(env.fake->wait_watches(3));
  std::jthread closer([&] {
    for (auto& r : regs[0]) r.close();
  });
  env.factory->shutdown();
  closer.join();
  EXPECT_EQ(env.fake->watch_calls().size(), 3u);
  // Shutdown leaves no watch open: each stream was cancelled, or released before it was read.
  for (auto& s : env.fake->opened()) EXPECT_TRUE(s->cancelled() || s->destroyed());
}

// Registration documents close() and its accessors as callable concurrently (e.g. a health probe
// reading has_synced() while a component shuts down and closes), and close() as idempotent from
// any thread: no data race on the handle itself.
TEST(InformerConcurrencyTest, RegistrationCloseRacesAccessorsAndAnotherClose) {
  testing::Env env;
  env.fake->add_list({make_object("ns", "a", "1")}, "10");
  auto& inf = env.factory->informer(testing::test_type());
  env.factory->start();
  for (int round = 0; round < 20; ++round) {
    auto reg = inf.add_handler(std::make_shared<testing::RecordingHandler>());
    std::latch go(3);
    std::thread reader([&] {
      go.arrive_and_wait();
      for (int i = 0; i < 200; ++i) {
        (void)reg.active();
        (void)reg.has_synced();
        (void)reg.queue_depth();
        (void)reg.id();
      }
    });
    std::thread closer([&] {
      go.arrive_and_wait();
      reg.close();
    });
    go.arrive_and_wait();
    reg.close();
    closer.join();
    reader.join();
    EXPECT_FALSE(reg.active());
  }
  EXPECT_EQ(inf.handler_count(), 0u);
}

}  // namespace
}  // namespace kinformer::informer
