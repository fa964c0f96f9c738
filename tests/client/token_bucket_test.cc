#include "kinformer/client/token_bucket.h"

#include <gtest/gtest.h>

#include <limits>
#include <memory>

#include "fake_clock.h"

namespace kinformer::client {
namespace {

using namespace std::chrono_literals;
using testing::FakeClock;
using ms = std::chrono::milliseconds;

ms as_ms(Clock::Duration d) { return std::chrono::duration_cast<ms>(d); }

TEST(TokenBucket, StartsFullAndRefillsAtItsRate) {
  auto clock = std::make_shared<FakeClock>();
  TokenBucket bucket(3, 2, clock);  // 3 at once, then 2/s
  EXPECT_DOUBLE_EQ(bucket.tokens(), 3);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(bucket.try_take()) << i;
  EXPECT_FALSE(bucket.try_take());
  clock->advance(499ms);
  EXPECT_FALSE(bucket.try_take());
  clock->advance(1ms);  // 0.5 s at 2/s: one token
  EXPECT_TRUE(bucket.try_take());
  EXPECT_FALSE(bucket.try_take());
  clock->advance(750ms);  // 1.5 tokens: one to take, half a token left over
  EXPECT_TRUE(bucket.try_take());
  EXPECT_DOUBLE_EQ(bucket.tokens(), 0.5);
}

TEST(TokenBucket, NeverHoldsMoreThanItsBurst) {
  auto clock = std::make_shared<FakeClock>();
  TokenBucket bucket(3, 2, clock);
  ASSERT_TRUE(bucket.try_take());
  clock->advance(1h);  // 7,200 tokens' worth of time
  EXPECT_DOUBLE_EQ(bucket.tokens(), 3);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(bucket.try_take()) << i;
  EXPECT_FALSE(bucket.try_take());
}

TEST(TokenBucket, ReserveReturnsTheWaitAndReservationsQueue) {
  auto clock = std::make_shared<FakeClock>();
  TokenBucket bucket(1, 4, clock);  // a token every 250 ms
  EXPECT_EQ(bucket.reserve(), Clock::Duration::zero());
  EXPECT_EQ(as_ms(bucket.reserve()), 250ms);
  EXPECT_EQ(as_ms(bucket.reserve()), 500ms);  // behind the one before it
  EXPECT_DOUBLE_EQ(bucket.tokens(), -2);      // two reservations waiting
  EXPECT_FALSE(bucket.try_take());            // a try does not jump the queue
  clock->advance(500ms);                      // both waits are over
  EXPECT_DOUBLE_EQ(bucket.tokens(), 0);
  EXPECT_EQ(as_ms(bucket.reserve()), 250ms);
}

TEST(TokenBucket, ZeroRateNeverRefills) {
  auto clock = std::make_shared<FakeClock>();
  TokenBucket bucket(1, 0, clock);
  EXPECT_EQ(bucket.reserve(), Clock::Duration::zero());
  EXPECT_EQ(bucket.reserve(), Clock::Duration::max());
  clock->advance(24h);
  EXPECT_FALSE(bucket.try_take());
}

TEST(TokenBucket, ResizeAccruesAtTheOldRateThenTheNew) {
  auto clock = std::make_shared<FakeClock>();
  TokenBucket bucket(2, 1, clock);
  ASSERT_TRUE(bucket.try_take());
  ASSERT_TRUE(bucket.try_take());
  clock->advance(500ms);  // half a token at 1/s
  bucket.resize(5, 10, 1);
  EXPECT_DOUBLE_EQ(bucket.burst(), 5);
  EXPECT_DOUBLE_EQ(bucket.rate(), 10);
  EXPECT_DOUBLE_EQ(bucket.tokens(), 1.5);  // not 5 (0.5 s at 10/s), plus the extra token
  clock->advance(100ms);                   // one more at the new rate
  EXPECT_DOUBLE_EQ(bucket.tokens(), 2.5);
  bucket.resize(5, 10, 100);  // extra tokens are capped at the burst
  EXPECT_DOUBLE_EQ(bucket.tokens(), 5);
}

TEST(TokenBucket, TimeGoingBackwardsTakesNothing) {
  struct BackwardsClock : FakeClock {
    TimePoint now() const override {
      return TimePoint{} + std::chrono::hours(1) - std::chrono::seconds(++calls);
    }
    mutable int calls = 0;
  };
  TokenBucket bucket(2, 1, std::make_shared<BackwardsClock>());
  ASSERT_TRUE(bucket.try_take());
  EXPECT_DOUBLE_EQ(bucket.tokens(), 1);
}

// One token short at 1e-12 tokens/s is 1e12 s, more nanoseconds than Clock::Duration holds: the
// wait is clamped before it is converted (the conversion itself would be undefined).
TEST(TokenBucket, TinyRateWaitIsClampedNotOverflowed) {
  auto clock = std::make_shared<FakeClock>();
  TokenBucket bucket(1, 1e-12, clock);
  EXPECT_EQ(bucket.reserve(), Clock::Duration::zero());
  EXPECT_EQ(bucket.reserve(), TokenBucket::kMaxWait);
  EXPECT_EQ(bucket.reserve(), TokenBucket::kMaxWait);
  // Below the clamp the wait is what the rate says: 2^30 s for one token at 2^-30/s (about 34
  // years; powers of two, so no rounding).
  TokenBucket slow(1, 1.0 / (1 << 30), clock);
  EXPECT_EQ(slow.reserve(), Clock::Duration::zero());
  EXPECT_EQ(slow.reserve(), std::chrono::seconds(1 << 30));
}

// NaN passes every comparison the bucket makes (rate <= 0 is false, tokens < 1 is false after
// a refill): it would switch limiting off without a word.
TEST(TokenBucket, NonFiniteRateOrBurstIsAConfigError) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  auto clock = std::make_shared<FakeClock>();
  EXPECT_THROW(TokenBucket(1, nan, clock), ConfigError);
  EXPECT_THROW(TokenBucket(1, inf, clock), ConfigError);
  EXPECT_THROW(TokenBucket(nan, 1, clock), ConfigError);
  EXPECT_THROW(TokenBucket(-inf, 1, clock), ConfigError);
  TokenBucket bucket(1, 1, clock);
  EXPECT_THROW(bucket.resize(2, nan), ConfigError);
  EXPECT_THROW(bucket.resize(nan, 2), ConfigError);
  EXPECT_THROW(bucket.resize(2, 2, nan), ConfigError);
  EXPECT_DOUBLE_EQ(bucket.rate(), 1);  // a rejected resize changes nothing
  EXPECT_DOUBLE_EQ(bucket.burst(), 1);
}

TEST(TokenBucket, NegativeRateAndBurstCountAsZero) {
  auto clock = std::make_shared<FakeClock>();
  TokenBucket bucket(-3, -1, clock);
  EXPECT_DOUBLE_EQ(bucket.burst(), 0);
  EXPECT_DOUBLE_EQ(bucket.rate(), 0);
  EXPECT_FALSE(bucket.try_take());
  EXPECT_EQ(bucket.reserve(), Clock::Duration::max());
}

}  // namespace
}  // namespace kinformer::client
