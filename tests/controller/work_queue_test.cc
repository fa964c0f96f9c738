// WorkQueue's rules one by one, on one thread and a manual clock: dedupe (the dirty set), one
// worker per key (the processing set), a key added while processed comes back after done(),
// delays (an earlier due replaces a later one), rate-limited adds, shutdown. Blocking get()
// and workers are in work_queue_concurrency_test.cc.
#include "kinformer/controller/work_queue.h"

#include <gtest/gtest.h>

#include "fakes.h"
#include "kinformer/client/error.h"

namespace kinformer::controller {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

struct WorkQueueTest : ::testing::Test {
  // Every wait on this clock is held until the test advances it (none happens in these tests:
  // get() is called only when a key is ready).
  std::shared_ptr<testing::ManualClock> clock =
      std::make_shared<testing::ManualClock>(Clock::Duration::zero());
  WorkQueue queue{{.name = "test", .clock = clock}};

  // get() when a key is ready; never blocks (these tests have no other thread to unblock it).
  std::string take() {
    if (queue.len() == 0) return "<none ready>";
    return queue.get().value_or("<shut down>");
  }
};

TEST_F(WorkQueueTest, AKeyAddedTwiceBeforeAWorkerTakesItIsHandedOutOnce) {
  queue.add("ns/a");
  queue.add("ns/b");
  queue.add("ns/a");
  EXPECT_EQ(queue.len(), 2u);
  EXPECT_EQ(take(), "ns/a");
  EXPECT_EQ(take(), "ns/b");
  EXPECT_EQ(queue.len(), 0u);
  queue.done("ns/a");
  queue.done("ns/b");
  EXPECT_EQ(queue.len(), 0u);
}

TEST_F(WorkQueueTest, KeysAreHandedOutInTheOrderTheyWereAdded) {
  for (const char* k : {"c", "a", "b"}) queue.add(k);
  EXPECT_EQ(take(), "c");
  EXPECT_EQ(take(), "a");
  EXPECT_EQ(take(), "b");
}

TEST_F(WorkQueueTest, AKeyBeingProcessedIsNotHandedOutAgainBeforeDone) {
  queue.add("a");
  EXPECT_EQ(take(), "a");
  queue.add("a");              // added while a worker holds it
  EXPECT_EQ(queue.len(), 0u);  // not ready: a second worker would take it
  queue.add("b");
  EXPECT_EQ(take(), "b");  // the other keys go on
  EXPECT_EQ(queue.len(), 0u);
  queue.done("b");
  EXPECT_EQ(queue.len(), 0u);
}

TEST_F(WorkQueueTest, AKeyAddedWhileProcessedIsHandedOutOnceMoreAfterDone) {
  queue.add("a");
  EXPECT_EQ(take(), "a");
  queue.add("a");
  queue.add("a");
  queue.done("a");
  EXPECT_EQ(queue.len(), 1u);
  EXPECT_EQ(take(), "a");
  queue.done("a");
  EXPECT_EQ(queue.len(), 0u);  // once more, not twice more
}

TEST_F(WorkQueueTest, DoneOfAKeyNotBeingProcessedIsIgnored) {
  queue.done("never-added");
  queue.add("a");
  queue.done("a");  // queued, not handed out: still queued, once
  EXPECT_EQ(queue.len(), 1u);
  EXPECT_EQ(take(), "a");
  queue.done("a");
  queue.done("a");
  EXPECT_EQ(queue.len(), 0u);
}

TEST_F(WorkQueueTest, AddAfterWaitsForTheDelayOnTheClock) {
  queue.add_after("a", seconds(5));
  EXPECT_EQ(queue.len(), 0u);
  clock->advance(milliseconds(4999));
  EXPECT_EQ(queue.len(), 0u);
  clock->advance(milliseconds(1));
  EXPECT_EQ(queue.len(), 1u);
  EXPECT_EQ(take(), "a");
}

TEST_F(WorkQueueTest, AddAfterWithoutADelayAddsAtOnce) {
  queue.add_after("a", Clock::Duration::zero());
  queue.add_after("b", seconds(-1));
  EXPECT_EQ(queue.len(), 2u);
}

TEST_F(WorkQueueTest, AnEarlierDelayReplacesALaterOneForTheSameKey) {
  queue.add_after("a", seconds(10));
  queue.add_after("a", seconds(5));
  clock->advance(seconds(5));
  EXPECT_EQ(queue.len(), 1u);
  EXPECT_EQ(take(), "a");
  queue.done("a");
  clock->advance(seconds(5));
  EXPECT_EQ(queue.len(), 0u);  // the 10 s entry was replaced, not kept besides
}

TEST_F(WorkQueueTest, ALaterDelayDoesNotPostponeAnEarlierOne) {
  queue.add_after("a", seconds(5));
  queue.add_after("a", seconds(10));
  clock->advance(seconds(5));
  EXPECT_EQ(queue.len(), 1u);
  EXPECT_EQ(take(), "a");
  queue.done("a");
  clock->advance(seconds(5));
  EXPECT_EQ(queue.len(), 0u);
}

TEST_F(WorkQueueTest, ADelayedKeyThatIsQueuedAlreadyIsHandedOutOnce) {
  queue.add("a");
  queue.add_after("a", seconds(1));
  clock->advance(seconds(1));
  EXPECT_EQ(queue.len(), 1u);
  EXPECT_EQ(take(), "a");
  EXPECT_EQ(queue.len(), 0u);
}

TEST_F(WorkQueueTest, DelayedKeysBecomeReadyInDueOrder) {
  queue.add_after("c", seconds(3));
  queue.add_after("a", seconds(1));
  queue.add_after("b", seconds(2));
  clock->advance(seconds(3));
  EXPECT_EQ(take(), "a");
  EXPECT_EQ(take(), "b");
  EXPECT_EQ(take(), "c");
}

TEST_F(WorkQueueTest, AddRateLimitedWaitsAsTheDefaultLimiterSaysAndForgetStartsOver) {
  queue.add_rate_limited("a");
  EXPECT_EQ(queue.num_requeues("a"), 1);
  clock->advance(milliseconds(4));
  EXPECT_EQ(queue.len(), 0u);
  clock->advance(milliseconds(1));  // 5 ms
  EXPECT_EQ(take(), "a");
  queue.add_rate_limited("a");  // failed again: 10 ms
  queue.done("a");
  clock->advance(milliseconds(9));
  EXPECT_EQ(queue.len(), 0u);
  clock->advance(milliseconds(1));
  EXPECT_EQ(take(), "a");
  EXPECT_EQ(queue.num_requeues("a"), 2);
  queue.forget("a");  // succeeded
  queue.done("a");
  EXPECT_EQ(queue.num_requeues("a"), 0);
  queue.add_rate_limited("a");
  clock->advance(milliseconds(5));
  EXPECT_EQ(queue.len(), 1u);
}

// A limiter of fixed answers, to see the queue asks it.
class FixedLimiter final : public RateLimiter {
 public:
  Clock::Duration when(const std::string& key) override {
    whens.push_back(key);
    return seconds(7);
  }
  void forget(const std::string& key) override { forgets.push_back(key); }
  int num_requeues(const std::string&) override { return 42; }
  std::vector<std::string> whens, forgets;
};

TEST(WorkQueueLimiterTest, UsesTheRateLimiterItIsGiven) {
  auto clock = std::make_shared<testing::ManualClock>(Clock::Duration::zero());
  auto limiter = std::make_unique<FixedLimiter>();
  auto* seen = limiter.get();
  WorkQueue queue({.clock = clock, .rate_limiter = std::move(limiter)});
  queue.add_rate_limited("a");
  queue.forget("b");
  EXPECT_EQ(queue.num_requeues("a"), 42);
  EXPECT_EQ(seen->whens, std::vector<std::string>{"a"});
  EXPECT_EQ(seen->forgets, std::vector<std::string>{"b"});
  clock->advance(seconds(6));
  EXPECT_EQ(queue.len(), 0u);
  clock->advance(seconds(1));
  EXPECT_EQ(queue.len(), 1u);
}

TEST_F(WorkQueueTest, ShutDownDropsEveryKeyAndIgnoresLaterAdds) {
  queue.add("held");
  EXPECT_EQ(take(), "held");
  queue.add("held");  // added while processed
  queue.add("ready");
  queue.add_after("delayed", seconds(1));
  EXPECT_FALSE(queue.shutting_down());
  queue.shut_down();
  EXPECT_TRUE(queue.shutting_down());
  EXPECT_EQ(queue.get(), std::nullopt);
  EXPECT_EQ(queue.len(), 0u);
  queue.add("new");
  queue.add_after("new", seconds(1));
  queue.add_rate_limited("new");
  clock->advance(seconds(10));
  EXPECT_EQ(queue.len(), 0u);
  EXPECT_EQ(queue.num_requeues("new"), 0);  // no retry counted after shutdown
  queue.done("held");                       // still allowed; nothing comes back
  EXPECT_EQ(queue.get(), std::nullopt);
  queue.shut_down();  // idempotent
  EXPECT_FALSE(queue.draining());
}

TEST_F(WorkQueueTest, ShutDownWithDrainAndNothingInProcessReturnsAtOnce) {
  queue.add("a");
  queue.shut_down_with_drain();
  EXPECT_TRUE(queue.shutting_down());
  EXPECT_EQ(queue.get(), std::nullopt);
}

}  // namespace
}  // namespace kinformer::controller
