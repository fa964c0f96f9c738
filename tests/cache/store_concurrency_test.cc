// Concurrency tests for Store and its lock: run under TSan (label "concurrency").
#include <atomic>
#include <chrono>
#include <mutex>
#include <shared_mutex>
#include <thread>

#include <gtest/gtest.h>

#include "kinformer/cache/shared_mutex.h"
#include "kinformer/cache/store.h"
#include "test_object.h"

namespace kinformer::cache {
namespace {

using std::chrono::steady_clock;

// Spins (yielding) until `ready` reaches `n`: lets the readers be running before a write starts,
// however the threads happen to be scheduled.
void wait_for(const std::atomic<int>& ready, int n) {
  while (ready.load() < n) std::this_thread::yield();
}

TEST(WriterPreferringMutexTest, AWaitingWriterHoldsBackNewReaders) {
  WriterPreferringMutex mu;
  mu.lock_shared();  // a reader inside
  std::atomic<bool> wrote{false};
  std::jthread writer([&] {
    std::unique_lock lock(mu);
    wrote = true;
  });
  // Once the writer waits, a new reader must not get in (with std::shared_mutex it always
  // does, and a writer waits for as long as readers overlap). 10 s: a liveness bound only.
  const auto deadline = steady_clock::now() + std::chrono::seconds(10);
  bool held_back = false;
  while (!held_back && steady_clock::now() < deadline) {
    if (mu.try_lock_shared()) {
      mu.unlock_shared();
      std::this_thread::yield();
    } else {
      held_back = true;
    }
  }
  EXPECT_TRUE(held_back) << "a new reader still got the lock while a writer was waiting";
  EXPECT_FALSE(wrote.load()) << "the writer got in while a reader held the lock";
  mu.unlock_shared();
  writer.join();
  EXPECT_TRUE(wrote.load());
  std::shared_lock after(mu);  // and readers get in again once the writer is done
  EXPECT_TRUE(after.owns_lock());
}

TEST(StoreConcurrencyTest, ReadersAndWritersDoNotRace) {
  Store s;
  s.add_index("app", [](const client::Object& o) {
    const std::string* v = client::find_value(o.metadata.labels, "app");
    return v ? std::vector<std::string>{*v} : std::vector<std::string>{};
  });
  constexpr int kReaders = 3;
  std::atomic<int> readers_running{0};
  std::atomic<int> writers_left{2};
  std::atomic<std::size_t> seen{0};
  std::vector<std::jthread> threads;
  for (int r = 0; r < kReaders; ++r) {
    threads.emplace_back([&] {
      ++readers_running;
      // Every reader reads during the writes (they start once the readers run, and pause
      // now and then: two writers in a row hand the lock on to each other) and once after.
      bool last = false;
      do {
        last = writers_left.load() == 0;
        for (const auto& o : s.list()) seen += o->metadata.name.size();
        seen += s.by_index("app", "a").size();
        seen += s.list_namespace("ns0").size();
        seen += s.list(LabelSelector::parse("app=b")).size();
        if (auto o = s.get("ns1/o3")) seen += o->metadata.resource_version.size();
        s.for_each([&](const client::ObjectPtr& o) { seen += o->key().size(); });
      } while (!last);
    });
  }
  std::vector<std::jthread> writers;
  for (int w = 0; w < 2; ++w) {
    writers.emplace_back([&, w] {
      wait_for(readers_running, kReaders);
      for (int i = 0; i < 2000; ++i) {
        auto name = "o" + std::to_string(i % 50);
        s.upsert(testing::make_object("ns" + std::to_string(w), name, std::to_string(i),
                                      {{"app", i % 2 ? "a" : "b"}}));
        if (i % 7 == 0) (void)s.remove("ns" + std::to_string(w) + "/" + name);
        if (i % 500 == 0) s.replace({testing::make_object("ns", "r", "1")}, std::to_string(i));
        if (i % 16 == 0) std::this_thread::yield();
      }
      if (w == 0) {
        s.add_index("late", [](const client::Object& o) {
          return std::vector<std::string>{o.metadata.name};
        });
      }
      --writers_left;
    });
  }
  writers.clear();
  threads.clear();
  EXPECT_TRUE(s.has_index("late"));
  EXPECT_GT(seen.load(), 0u);
}

// Readers that always overlap (each starts before the last one ends) never leave the store
// free of readers: the writer must still get through. With std::shared_mutex on two cores, 100
// writes took 37-60+ s; 1,000 take well under 1 s with the lock. 60 s: a liveness bound, for
// the writes and the readers alike (readers stop at it, so a write starved by them fails the
// test instead of hanging it).
TEST(StoreConcurrencyTest, OverlappingReadersDoNotStarveTheWriter) {
  Store s;
  for (int i = 0; i < 2000; ++i) s.upsert(testing::make_object("ns", "o" + std::to_string(i)));
  constexpr int kReaders = 3;
  std::atomic<int> readers_running{0};
  std::atomic<bool> done{false};
  std::atomic<std::size_t> seen{0};
  const auto deadline = steady_clock::now() + std::chrono::seconds(60);
  std::vector<std::jthread> readers;
  for (int r = 0; r < kReaders; ++r) {
    readers.emplace_back([&] {
      ++readers_running;
      // for_each: a reader's whole pass is under the lock, as a lister's would be that
      // filters in place.
      while (!done.load() && steady_clock::now() < deadline) {
        std::size_t n = 0;
        s.for_each([&n](const client::ObjectPtr& o) { n += o->metadata.name.size(); });
        seen += n;
      }
    });
  }
  wait_for(readers_running, kReaders);
  int writes = 0;
  for (; writes < 1000 && steady_clock::now() < deadline; ++writes) {
    s.upsert(testing::make_object("ns", "o" + std::to_string(writes % 2000), "2"));
  }
  done = true;
  readers.clear();
  EXPECT_EQ(writes, 1000) << "the writer starved behind overlapping readers";
  EXPECT_EQ(s.get("ns/o999")->metadata.resource_version, "2");
  EXPECT_GT(seen.load(), 0u);
}

}  // namespace
}  // namespace kinformer::cache
