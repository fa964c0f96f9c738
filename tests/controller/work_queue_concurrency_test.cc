// WorkQueue with threads: a worker blocked in get() wakes for a key, for a delayed key that
// falls due on the manual clock, and for shutdown; a drain waits for done(); many workers and
// producers never process a key twice at once and process every key after its last add.
// Real time is only ever a failure deadline (testing::kDeadline).
#include <atomic>
#include <future>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "fakes.h"
#include "kinformer/controller/work_queue.h"

namespace kinformer::controller {
namespace {

using std::chrono::hours;
using std::chrono::seconds;
using testing::kDeadline;

struct WorkQueueConcurrencyTest : ::testing::Test {
  // Every wait on this clock is held until the test advances it past its end.
  std::shared_ptr<testing::ManualClock> clock =
      std::make_shared<testing::ManualClock>(Clock::Duration::zero());
  WorkQueue queue{{.name = "test", .clock = clock}};

  std::future<std::optional<std::string>> get_async() {
    return std::async(std::launch::async, [this] { return queue.get(); });
  }
  // A get() sleeps on the clock (a wait held until the clock is advanced past its end; with
  // `since`, one that began after the first `since` waits). After the deadline the queue is
  // shut down, so that blocked get() calls return and the test can end.
  bool held(std::optional<std::size_t> since = std::nullopt) {
    if (since ? clock->wait_held_since(*since) : clock->wait_held()) return true;
    queue.shut_down();
    return false;
  }
  // The future's result; "<still blocked>" after the deadline (then the queue is shut down, so
  // that the future's destructor does not wait for ever).
  std::optional<std::string> result(std::future<std::optional<std::string>>& f) {
    if (f.wait_for(kDeadline) == std::future_status::ready) return f.get();
    queue.shut_down();
    return "<still blocked>";
  }
};

TEST_F(WorkQueueConcurrencyTest, AWorkerBlockedInGetWakesForAnAdd) {
  auto got = get_async();
  queue.add("a");
  EXPECT_EQ(result(got), "a");
}

TEST_F(WorkQueueConcurrencyTest, AWorkerBlockedInGetSleepsOnTheClockUntilTheDelayedKeyIsDue) {
  queue.add_after("a", seconds(5));
  auto got = get_async();
  ASSERT_TRUE(held());
  EXPECT_EQ(clock->sleeps().back(), seconds(5));
  clock->advance(seconds(5));
  EXPECT_EQ(result(got), "a");
}

TEST_F(WorkQueueConcurrencyTest, AnEarlierDelayedKeyShortensTheSleep) {
  queue.add_after("late", seconds(10));
  auto got = get_async();
  ASSERT_TRUE(held());
  const auto sleeps = clock->sleeps().size();
  queue.add_after("early", seconds(2));
  ASSERT_TRUE(held(sleeps));
  EXPECT_EQ(clock->sleeps().back(), seconds(2));
  clock->advance(seconds(2));
  EXPECT_EQ(result(got), "early");
}

TEST_F(WorkQueueConcurrencyTest, AReadyKeyWakesTheOnlyWorkerWhileItSleepsOnTheClock) {
  queue.add_after("later", hours(1));
  auto got = get_async();
  ASSERT_TRUE(held());
  queue.add("now");
  EXPECT_EQ(result(got), "now");  // without the clock moving
}

TEST_F(WorkQueueConcurrencyTest, ASecondWorkerTakesOverTheSleepWhenTheSleeperTakesAKey) {
  queue.add_after("later", seconds(30));
  auto first = get_async();
  ASSERT_TRUE(held());
  auto second = get_async();
  queue.add("now");  // one of them takes it; the other must sleep for "later"
  // Whichever returns first took "now".
  std::optional<std::string> taken;
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (!taken && std::chrono::steady_clock::now() < deadline) {
    for (auto* f : {&first, &second}) {
      if (!taken && f->wait_for(std::chrono::milliseconds(1)) == std::future_status::ready) {
        taken = f->get();
      }
    }
  }
  EXPECT_EQ(taken, "now");
  auto& rest = first.valid() ? first : second;
  ASSERT_TRUE(held());  // the other one sleeps on the clock
  EXPECT_EQ(clock->sleeps().back(), seconds(30));
  clock->advance(seconds(30));
  EXPECT_EQ(result(rest), "later");
}

TEST_F(WorkQueueConcurrencyTest, ShutDownWakesWorkersWaitingForAKeyAndSleepingOnTheClock) {
  std::vector<std::future<std::optional<std::string>>> workers;
  for (int i = 0; i < 3; ++i) workers.push_back(get_async());
  queue.add_after("later", hours(1));
  ASSERT_TRUE(held());  // one of them sleeps on the clock, the others wait
  queue.shut_down();
  for (auto& w : workers) EXPECT_EQ(result(w), std::nullopt);
}

TEST_F(WorkQueueConcurrencyTest, ShutDownWithDrainWaitsUntilEveryKeyHandedOutIsDone) {
  queue.add("a");
  queue.add("b");
  ASSERT_EQ(queue.get(), "a");  // a worker holds a
  std::atomic<bool> returned{false};
  std::thread drainer([&] {
    queue.shut_down_with_drain();
    returned = true;
  });
  if (!testing::eventually([&] { return queue.draining(); })) {
    queue.shut_down();
    drainer.join();
    FAIL() << "shut_down_with_drain() did not wait for the key handed out";
  }
  EXPECT_EQ(queue.get(), std::nullopt);  // no new work while draining: b was dropped
  queue.add("c");
  EXPECT_EQ(queue.len(), 0u);
  EXPECT_FALSE(returned);  // the drain waits for a
  queue.done("a");
  drainer.join();
  EXPECT_TRUE(returned);
  EXPECT_FALSE(queue.draining());
}

TEST_F(WorkQueueConcurrencyTest, ShutDownEndsADrainThatWaits) {
  queue.add("a");
  ASSERT_EQ(queue.get(), "a");
  std::thread drainer([&] { queue.shut_down_with_drain(); });
  EXPECT_TRUE(testing::eventually([&] { return queue.draining(); }));
  queue.shut_down();
  drainer.join();  // returns although a was never done
  EXPECT_FALSE(queue.draining());
}

// Producers add keys (each add after bumping the key's version); workers check that no key is
// ever processed by two of them at once and record the newest version they saw at the start of
// processing. Every key must be processed after its last add: its newest seen version is its
// last one. `delayed`: every other add is an add_after() on the manual clock, which a ticker
// advances.
void many_workers_and_producers(bool delayed) {
  constexpr int kKeys = 16, kWorkers = 4, kProducers = 3, kAddsPerProducer = 3000;
  auto clock = std::make_shared<testing::ManualClock>(Clock::Duration::zero());
  WorkQueue queue({.name = "stress", .clock = clock});
  std::vector<std::atomic<int>> version(kKeys), seen(kKeys), in_flight(kKeys);
  std::atomic<int> overlaps{0}, processed{0};
  auto index = [](const std::string& key) { return std::stoi(key.substr(1)); };

  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&] {
      while (auto key = queue.get()) {
        const int k = index(*key);
        if (in_flight[k].fetch_add(1) != 0) ++overlaps;
        const int v = version[k].load();
        int prev = seen[k].load();
        while (v > prev && !seen[k].compare_exchange_weak(prev, v)) {
        }
        std::this_thread::yield();  // let others try to take the same key meanwhile
        in_flight[k].fetch_sub(1);
        ++processed;
        queue.done(*key);
      }
    });
  }
  std::atomic<bool> producing{true};
  std::thread ticker([&] {  // the manual clock's time passes while producers add
    while (producing) {
      clock->advance(std::chrono::milliseconds(1));
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      std::mt19937 random(p);
      for (int i = 0; i < kAddsPerProducer; ++i) {
        const int k = static_cast<int>(random() % kKeys);
        ++version[k];
        const std::string key = "k" + std::to_string(k);
        if (delayed && i % 2 == 1) {
          queue.add_after(key, std::chrono::milliseconds(random() % 20));
        } else {
          queue.add(key);
        }
      }
    });
  }
  for (auto& t : producers) t.join();
  producing = false;
  ticker.join();
  // Every key reaches its last version; the clock keeps moving so that delayed keys fall due
  // (a sleeper's wait ends once time passes its end).
  const bool converged = testing::eventually([&] {
    clock->advance(std::chrono::milliseconds(20));
    for (int k = 0; k < kKeys; ++k) {
      if (seen[k].load() != version[k].load()) return false;
    }
    return true;
  });
  queue.shut_down();
  for (auto& t : workers) t.join();
  EXPECT_TRUE(converged);
  for (int k = 0; k < kKeys; ++k) {
    EXPECT_EQ(seen[k].load(), version[k].load()) << "k" << k << " not processed after its last add";
  }
  EXPECT_EQ(overlaps.load(), 0) << "a key was processed by two workers at once";
  // At least once per key; how many more depends on how the adds and the workers interleave
  // (producers that outrun every worker leave each key to be processed once: that is dedupe).
  EXPECT_GE(processed.load(), kKeys);
}

TEST_F(WorkQueueConcurrencyTest, ManyWorkersAndProducersNeverOverlapOnAKeyAndMissNoAdd) {
  many_workers_and_producers(false);
}

TEST_F(WorkQueueConcurrencyTest, WithDelayedAddsToo) { many_workers_and_producers(true); }

}  // namespace
}  // namespace kinformer::controller
