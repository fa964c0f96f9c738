#include "kinformer/client/rate_limiter.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <limits>
#include <stop_token>
#include <thread>
#include <vector>

#include "fake_clock.h"

namespace kinformer::client {
namespace {

using namespace std::chrono_literals;
using testing::FakeClock;

TEST(RateLimiter, DefaultsMatchClientGo) {
  RateLimiter limiter;
  EXPECT_EQ(limiter.options().qps, 5.0);
  EXPECT_EQ(limiter.options().burst, 10);
}

TEST(RateLimiter, NonFiniteQpsIsAConfigError) {
  EXPECT_THROW(RateLimiter({.qps = std::numeric_limits<double>::quiet_NaN(), .burst = 1}),
               ConfigError);
  EXPECT_THROW(RateLimiter({.qps = std::numeric_limits<double>::infinity(), .burst = 1}),
               ConfigError);
}

TEST(RateLimiter, BurstThenQps) {
  auto clock = std::make_shared<FakeClock>();
  RateLimiter limiter({.qps = 5, .burst = 10}, clock);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(limiter.try_acquire()) << i;
  EXPECT_FALSE(limiter.try_acquire());
  clock->advance(199ms);
  EXPECT_FALSE(limiter.try_acquire());
  clock->advance(1ms);
  EXPECT_TRUE(limiter.try_acquire());
  EXPECT_FALSE(limiter.try_acquire());
  clock->advance(10s);  // refills to burst, not beyond
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(limiter.try_acquire());
  EXPECT_FALSE(limiter.try_acquire());
}

TEST(RateLimiter, ReserveReturnsWaits) {
  auto clock = std::make_shared<FakeClock>();
  RateLimiter limiter({.qps = 10, .burst = 1}, clock);
  auto ms = [](std::chrono::nanoseconds d) { return static_cast<double>(d.count()) / 1e6; };
  EXPECT_EQ(limiter.reserve(), 0ns);
  EXPECT_NEAR(ms(limiter.reserve()), 100, 0.01);
  EXPECT_NEAR(ms(limiter.reserve()), 200, 0.01);
  clock->advance(200ms);
  EXPECT_NEAR(ms(limiter.reserve()), 100, 0.01);
}

TEST(RateLimiter, AcquireSleepsForTheReservedWait) {
  auto clock = std::make_shared<FakeClock>();  // its sleeps let time pass
  RateLimiter limiter({.qps = 10, .burst = 2}, clock);
  ASSERT_TRUE(limiter.acquire());
  ASSERT_TRUE(limiter.acquire());
  EXPECT_TRUE(clock->sleeps().empty());  // the burst is free
  ASSERT_TRUE(limiter.acquire());        // the bucket is empty: wait 1/qps for the next token
  auto sleeps = clock->sleeps();
  ASSERT_EQ(sleeps.size(), 1u);
  EXPECT_NEAR(static_cast<double>(sleeps[0].count()), 100e6, 1e3);
  ASSERT_TRUE(limiter.acquire());
  sleeps = clock->sleeps();
  ASSERT_EQ(sleeps.size(), 2u);
  EXPECT_NEAR(static_cast<double>(sleeps[1].count()), 100e6, 1e3);
  EXPECT_FALSE(limiter.try_acquire());  // the sleeps used the tokens they waited for
  clock->advance(1s);                   // idle: the burst refills, no sleeping
  ASSERT_TRUE(limiter.acquire());
  ASSERT_TRUE(limiter.acquire());
  EXPECT_EQ(clock->sleeps().size(), 2u);
}

// A waiter sleeping for its token (20 s here) wakes as soon as its stop token is triggered and
// fails with Errc::cancelled; its reservation is spent. The clock tells when the waiter has
// reserved; stopping before or during its sleep must both end it.
TEST(RateLimiter, AcquireIsCancelledByItsStopToken) {
  std::atomic<int> clock_calls{0};
  auto clock = std::make_shared<testing::FunctionClock>([&] {  // waits are the real ones
    ++clock_calls;
    return std::chrono::steady_clock::time_point{};
  });
  RateLimiter limiter({.qps = 0.05, .burst = 1}, clock);
  ASSERT_TRUE(limiter.try_acquire());  // the bucket is now empty
  std::stop_source stop;
  auto waiter = std::async(std::launch::async, [&] { return limiter.acquire(stop.get_token()); });
  while (clock_calls.load() < 3) std::this_thread::yield();  // constructor, try_acquire, reserve
  stop.request_stop();
  // Only proves that it did not sleep for its 20 s.
  ASSERT_EQ(waiter.wait_for(10s), std::future_status::ready);
  auto r = waiter.get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::cancelled);
  EXPECT_NE(r.error().message.find("rate limiter wait cancelled"), std::string::npos)
      << r.error().message;
  // Already stopped: fails at once, without taking a token.
  RateLimiter fresh({.qps = 0.05, .burst = 1});
  auto again = fresh.acquire(stop.get_token());
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, Errc::cancelled);
  EXPECT_TRUE(fresh.try_acquire());
}

TEST(RateLimiter, ZeroQpsIsUnlimited) {
  RateLimiter limiter({.qps = 0, .burst = 1});
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(limiter.try_acquire());
}

}  // namespace
}  // namespace kinformer::client
