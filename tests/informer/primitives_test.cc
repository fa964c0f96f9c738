// Backoff, ReconnectBudget, OnceGuard.
#include <atomic>
#include <latch>
#include <thread>

#include <gtest/gtest.h>

#include "fakes.h"
#include "kinformer/informer/backoff.h"
#include "kinformer/informer/once_guard.h"
#include "kinformer/informer/reconnect_budget.h"

namespace kinformer::informer {
namespace {

using namespace std::chrono_literals;
using ms = std::chrono::milliseconds;

ms as_ms(Clock::Duration d) { return std::chrono::duration_cast<ms>(d); }

TEST(BackoffTest, ClientGoDefaultsWithFixedRandom) {
  auto clock = std::make_shared<testing::ManualClock>();
  JitteredExponentialBackoff b(BackoffOptions{}, clock, [] { return 0.5; });
  std::vector<ms> got;
  for (int i = 0; i < 8; ++i) got.push_back(as_ms(b.next()));
  EXPECT_EQ(got, (std::vector<ms>{1200ms, 2400ms, 4800ms, 9600ms, 19200ms, 38400ms, 45000ms, 45000ms}));
  clock->advance(2min);  // healthy for the reset period
  EXPECT_EQ(as_ms(b.next()), 1200ms);
  EXPECT_EQ(as_ms(b.next()), 2400ms);
  b.reset();
  EXPECT_EQ(as_ms(b.next()), 1200ms);
}

TEST(BackoffTest, ZeroRandomIsTheBareExponential) {
  auto clock = std::make_shared<testing::ManualClock>();
  BackoffOptions o;
  o.initial = 100ms;
  o.max = 1s;
  JitteredExponentialBackoff b(o, clock, [] { return 0.0; });
  std::vector<ms> got;
  for (int i = 0; i < 6; ++i) got.push_back(as_ms(b.next()));
  EXPECT_EQ(got, (std::vector<ms>{100ms, 200ms, 400ms, 800ms, 1000ms, 1000ms}));
}

TEST(ReconnectBudgetTest, BurstThenRateAndDenials) {
  auto clock = std::make_shared<testing::ManualClock>();
  ReconnectBudget budget({.burst = 2, .per_second = 2}, clock);
  EXPECT_EQ(budget.reserve(), Clock::Duration::zero());
  EXPECT_EQ(budget.reserve(), Clock::Duration::zero());
  EXPECT_EQ(as_ms(budget.reserve()), 500ms);
  EXPECT_EQ(as_ms(budget.reserve()), 1000ms);  // reservations queue
  EXPECT_EQ(budget.denials(), 2u);
  EXPECT_FALSE(budget.try_acquire());
  EXPECT_EQ(budget.denials(), 3u);
  clock->advance(10s);
  EXPECT_TRUE(budget.try_acquire());
  EXPECT_EQ(budget.reserve(), Clock::Duration::zero());
  EXPECT_EQ(as_ms(budget.reserve()), 500ms);
}

TEST(ReconnectBudgetTest, DefaultsAreDocumented) {
  ReconnectBudgetOptions o;
  EXPECT_EQ(o.burst, 10);
  EXPECT_EQ(o.per_second, 2);
}

TEST(OnceGuardTest, FailureGoesToCallerAndNextCallRetries) {
  OnceGuard g;
  int runs = 0;
  auto fail = [&] {
    ++runs;
    return client::Status(client::Error::make(client::Errc::network, "down"));
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
  OnceGuard t;
  EXPECT_THROW(t.run([]() -> client::Status { throw std::runtime_error("x"); }), std::runtime_error);
  EXPECT_FALSE(t.done());
  EXPECT_TRUE(t.run(ok).ok());
}

TEST(OnceGuardTest, ConcurrentCallersWaitForTheOneInFlight) {
  OnceGuard g;
  std::atomic<int> runs{0};
  std::atomic<int> concurrent{0};
  std::atomic<int> max_concurrent{0};
  std::atomic<int> failures{0};
  std::latch go(8);
  auto step = [&] {
    int c = ++concurrent;
    int prev = max_concurrent.load();
    while (c > prev && !max_concurrent.compare_exchange_weak(prev, c)) {
    }
    int n = ++runs;
    --concurrent;
    if (n < 3) return client::Status(client::Error::make(client::Errc::network, "fail"));
    return client::Status(client::Ok{});
  };
  {
    std::vector<std::jthread> threads;
    for (int i = 0; i < 8; ++i) {
      threads.emplace_back([&] {
        go.arrive_and_wait();
        if (!g.run(step).ok()) ++failures;
      });
    }
  }
  EXPECT_EQ(max_concurrent.load(), 1);
  EXPECT_EQ(runs.load(), 3);  // two failures, then one success that every later caller sees
  EXPECT_EQ(failures.load(), 2);
  EXPECT_TRUE(g.done());
}

}  // namespace
}  // namespace kinformer::informer
