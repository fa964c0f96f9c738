// Backoff, ReconnectBudget.
#include <atomic>
#include <latch>
#include <thread>

#include <gtest/gtest.h>

#include "fakes.h"
#include "kinformer/informer/backoff.h"
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

}  // namespace
}  // namespace kinformer::informer
