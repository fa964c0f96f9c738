// OnceGuard: every promise of once_guard.h. The concurrent tests hold the step on a latch until
// the other callers are observably waiting, so callers really overlap.
#include "kinformer/informer/once_guard.h"

#include <atomic>
#include <latch>
#include <optional>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include "fakes.h"

namespace kinformer::informer {
namespace {

client::Status failure(const char* why) { return client::Error::make(client::Errc::network, why); }

// A step that announces it runs, then blocks until released with a chosen result.
class HeldStep {
 public:
  client::Status operator()() {
    int now = ++inside_;
    int prev = max_inside_.load();
    while (now > prev && !max_inside_.compare_exchange_weak(prev, now)) {
    }
    ++runs_;
    std::unique_lock lock(mu_);
    entered_ = true;
    cv_.notify_all();
    cv_.wait(lock, [this] { return result_.has_value(); });
    client::Status r = *result_;
    --inside_;
    return r;
  }
  /// True once the step runs; false after the test deadline (a broken guard never ran it).
  [[nodiscard]] bool wait_entered() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, testing::kDeadline, [this] { return entered_; });
  }
  void release(client::Status r) {
    std::lock_guard lock(mu_);
    result_ = std::move(r);
    cv_.notify_all();
  }
  /// Releases with a failure if the test did not release it (a failed assertion must not leave
  /// the caller threads blocked, or the test would hang instead of failing).
  void release_if_held() {
    std::lock_guard lock(mu_);
    if (!result_) result_ = failure("released by the test's cleanup");
    cv_.notify_all();
  }
  int runs() const { return runs_.load(); }
  int max_inside() const { return max_inside_.load(); }

 private:
  bool entered_ = false;  // guarded by mu_
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<client::Status> result_;
  std::atomic<int> inside_{0};
  std::atomic<int> max_inside_{0};
  std::atomic<int> runs_{0};
};

// Declared after the threads: on scope exit it releases the steps before the threads are joined.
struct ReleaseOnExit {
  std::vector<HeldStep*> steps;
  ~ReleaseOnExit() {
    for (auto* s : steps) s->release_if_held();
  }
};

TEST(OnceGuardTest, FailureGoesToCallerAndNextCallRetries) {
  OnceGuard g;
  int runs = 0;
  auto fail = [&] {
    ++runs;
    return failure("down");
  };
  auto ok = [&] {
    ++runs;
    return client::Status(client::Ok{});
  };
  auto s = g.run(fail);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message, "down");
  EXPECT_FALSE(g.done());
  EXPECT_TRUE(g.run(ok).ok());
  EXPECT_TRUE(g.done());
  EXPECT_TRUE(g.run(fail).ok());  // not run again
  EXPECT_EQ(runs, 2);
}

TEST(OnceGuardTest, AThrowingStepIsAFailureAndIsRethrown) {
  OnceGuard g;
  EXPECT_THROW(g.run([]() -> client::Status { throw std::runtime_error("x"); }),
               std::runtime_error);
  EXPECT_FALSE(g.done());
  int runs = 0;
  EXPECT_TRUE(g.run([&] {
                 ++runs;
                 return client::Status(client::Ok{});
               }).ok());
  EXPECT_EQ(runs, 1);
  EXPECT_TRUE(g.done());
}

// A caller that arrives while the step runs must not see success before the step succeeded;
// when the step then fails, that caller runs the step itself.
TEST(OnceGuardTest, CallerArrivingMidStepWaitsAndRetriesAfterAFailure) {
  OnceGuard g;
  HeldStep first;
  std::optional<client::Status> first_result;
  std::jthread a([&] { first_result = g.run(std::ref(first)); });
  ReleaseOnExit cleanup_a{{&first}};
  ASSERT_TRUE(first.wait_entered());
  std::atomic<bool> b_returned{false};
  std::atomic<int> b_runs{0};
  std::optional<client::Status> b_result;
  std::jthread b([&] {
    b_result = g.run([&] {
      ++b_runs;
      return client::Status(client::Ok{});
    });
    b_returned = true;
  });
  ReleaseOnExit cleanup_b{{&first}};
  ASSERT_TRUE(testing::eventually([&] { return g.waiters() == 1 || b_returned; }));
  EXPECT_FALSE(b_returned) << "a caller returned while the first step was still running";
  EXPECT_FALSE(g.done()) << "success recorded before the step returned";
  first.release(failure("first attempt failed"));
  a.join();
  b.join();
  ASSERT_TRUE(first_result.has_value());
  EXPECT_FALSE(first_result->ok());
  ASSERT_TRUE(b_result.has_value());
  EXPECT_TRUE(b_result->ok());
  EXPECT_EQ(b_runs.load(), 1) << "the waiter retries the failed step";
  EXPECT_TRUE(g.done());
}

// Callers arriving mid-step wait for the call in flight and share its success: the step never
// runs twice at once, and not again after it succeeded.
TEST(OnceGuardTest, ConcurrentCallersWaitForTheCallInFlightAndShareItsSuccess) {
  OnceGuard g;
  HeldStep step;
  std::vector<std::optional<client::Status>> results(4);
  std::vector<std::jthread> threads;
  ReleaseOnExit cleanup{{&step}};
  threads.emplace_back([&] { results[0] = g.run(std::ref(step)); });
  ASSERT_TRUE(step.wait_entered());
  for (int i = 1; i < 4; ++i) {
    threads.emplace_back([&, i] { results[i] = g.run(std::ref(step)); });
  }
  ASSERT_TRUE(testing::eventually([&] { return g.waiters() == 3 || step.max_inside() > 1; }));
  EXPECT_EQ(step.max_inside(), 1) << "a second caller ran the step while the first was running";
  step.release(client::Ok{});
  threads.clear();
  EXPECT_EQ(step.runs(), 1);
  for (const auto& r : results) {
    ASSERT_TRUE(r.has_value());
    EXPECT_TRUE(r->ok());
  }
  EXPECT_EQ(g.waiters(), 0u);
}

// After a failure with several waiters, exactly one waiter retries; the others wait for that
// retry and see its result.
TEST(OnceGuardTest, AfterAFailureExactlyOneWaiterRetriesWhileTheOthersWait) {
  OnceGuard g;
  HeldStep first;
  HeldStep retry;
  std::atomic<int> step_calls{0};
  // Every caller passes the same step: the first call runs `first`, the next one `retry`.
  auto step = [&]() -> client::Status { return ++step_calls == 1 ? first() : retry(); };
  std::vector<std::optional<client::Status>> results(3);
  std::vector<std::jthread> threads;
  ReleaseOnExit cleanup{{&first, &retry}};
  threads.emplace_back([&] { results[0] = g.run(step); });
  ASSERT_TRUE(first.wait_entered());
  threads.emplace_back([&] { results[1] = g.run(step); });
  threads.emplace_back([&] { results[2] = g.run(step); });
  ASSERT_TRUE(testing::eventually([&] { return g.waiters() == 2; }));
  first.release(failure("first"));
  ASSERT_TRUE(retry.wait_entered()) << "no waiter retried the failed step";
  // One waiter now runs the retry; the other must be waiting for it, not running it too.
  ASSERT_TRUE(testing::eventually([&] { return g.waiters() == 1 || retry.max_inside() > 1; }));
  EXPECT_EQ(retry.max_inside(), 1);
  retry.release(client::Ok{});
  threads.clear();
  EXPECT_EQ(step_calls.load(), 2);
  EXPECT_FALSE(results[0]->ok());
  EXPECT_TRUE(results[1]->ok());
  EXPECT_TRUE(results[2]->ok());
  EXPECT_TRUE(g.done());
}

}  // namespace
}  // namespace kinformer::informer
