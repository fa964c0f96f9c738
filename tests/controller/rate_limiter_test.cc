// The rate limiters' numbers: client-go's per-key exponential backoff (5 ms doubling to 1000 s),
// its token bucket (burst 100, then 10 per second) and the default that takes the longer.
#include "kinformer/controller/rate_limiter.h"

#include <string>

#include <gtest/gtest.h>

#include "fakes.h"
#include "kinformer/client/error.h"

namespace kinformer::controller {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Duration = Clock::Duration;

std::shared_ptr<testing::ManualClock> manual_clock() {
  return std::make_shared<testing::ManualClock>(Duration::zero());
}

TEST(ItemExponentialFailureRateLimiterTest, DoublesFromFiveMillisecondsAndStopsAtThousandSeconds) {
  ItemExponentialFailureRateLimiter limiter(milliseconds(5), seconds(1000));
  Duration expected = milliseconds(5);
  for (int n = 0; n < 18; ++n) {  // 5 ms * 2^17 = 655.36 s, the last below the cap
    EXPECT_EQ(limiter.when("a"), expected) << "retry " << n;
    expected *= 2;
  }
  EXPECT_EQ(limiter.when("a"), seconds(1000));       // 1310.72 s capped
  for (int n = 0; n < 2000; ++n) limiter.when("a");  // 2^2000 is no number: still the cap
  EXPECT_EQ(limiter.when("a"), seconds(1000));
  EXPECT_EQ(limiter.num_requeues("a"), 18 + 1 + 2000 + 1);
}

TEST(ItemExponentialFailureRateLimiterTest, EachKeyBacksOffOnItsOwnAndForgetStartsItOver) {
  ItemExponentialFailureRateLimiter limiter(milliseconds(5), seconds(1000));
  EXPECT_EQ(limiter.when("a"), milliseconds(5));
  EXPECT_EQ(limiter.when("a"), milliseconds(10));
  EXPECT_EQ(limiter.when("a"), milliseconds(20));
  EXPECT_EQ(limiter.when("b"), milliseconds(5));
  EXPECT_EQ(limiter.num_requeues("a"), 3);
  EXPECT_EQ(limiter.num_requeues("b"), 1);
  EXPECT_EQ(limiter.num_requeues("c"), 0);
  limiter.forget("a");
  EXPECT_EQ(limiter.num_requeues("a"), 0);
  EXPECT_EQ(limiter.when("a"), milliseconds(5));
  EXPECT_EQ(limiter.num_requeues("b"), 1);  // forgetting one key leaves the others
}

TEST(ItemExponentialFailureRateLimiterTest, NegativeDelaysAreRefused) {
  EXPECT_THROW(ItemExponentialFailureRateLimiter(milliseconds(-1), seconds(1)),
               client::ConfigError);
  EXPECT_THROW(ItemExponentialFailureRateLimiter(milliseconds(1), seconds(-1)),
               client::ConfigError);
}

TEST(BucketRateLimiterTest, BurstOfHundredThenTenPerSecond) {
  auto clock = manual_clock();
  BucketRateLimiter limiter(10, 100, clock);
  for (int n = 0; n < 100; ++n) EXPECT_EQ(limiter.when("k" + std::to_string(n)), Duration::zero());
  // Each reservation past the burst waits for its own token, 100 ms after the previous one.
  for (int n = 1; n <= 10; ++n) EXPECT_EQ(limiter.when("x"), milliseconds(100 * n)) << n;
  // Two seconds give 20 tokens: 10 pay the reservations above, 10 are free.
  clock->advance(seconds(2));
  for (int n = 0; n < 10; ++n) EXPECT_EQ(limiter.when("y"), Duration::zero()) << n;
  EXPECT_EQ(limiter.when("y"), milliseconds(100));
  EXPECT_EQ(limiter.num_requeues("x"), 0);  // a bucket counts no retries per key
  limiter.forget("x");
}

TEST(BucketRateLimiterTest, NoRateWaitsTheLongestWaitNotForever) {
  BucketRateLimiter limiter(0, 1, manual_clock());
  EXPECT_EQ(limiter.when("a"), Duration::zero());
  EXPECT_EQ(limiter.when("a"), client::TokenBucket::kMaxWait);
}

TEST(MaxOfRateLimiterTest, NeedsLimiters) {
  EXPECT_THROW(MaxOfRateLimiter({}), client::ConfigError);
  std::vector<RateLimiterPtr> with_null;
  with_null.push_back(nullptr);
  EXPECT_THROW(MaxOfRateLimiter(std::move(with_null)), client::ConfigError);
}

TEST(DefaultControllerRateLimiterTest, TheLongerOfThePerKeyBackoffAndTheOverallBucket) {
  auto clock = manual_clock();
  auto limiter = default_controller_rate_limiter({}, clock);
  for (int n = 0; n < 10; ++n) EXPECT_EQ(limiter->when("a"), milliseconds(5) * (1 << n)) << n;
  for (int n = 0; n < 90; ++n) EXPECT_EQ(limiter->when("k" + std::to_string(n)), milliseconds(5));
  // The burst of 100 is spent: a new key waits for the bucket (100 ms), not its own 5 ms.
  EXPECT_EQ(limiter->when("b"), milliseconds(100));
  EXPECT_EQ(limiter->num_requeues("a"), 10);
  EXPECT_EQ(limiter->num_requeues("b"), 1);
  limiter->forget("a");
  EXPECT_EQ(limiter->num_requeues("a"), 0);
  EXPECT_EQ(limiter->when("a"), milliseconds(200));  // its own 5 ms again; the bucket's 200 ms
  clock->advance(seconds(100));                      // the bucket full again
  EXPECT_EQ(limiter->when("a"), milliseconds(10));
}

TEST(DefaultControllerRateLimiterTest, EveryNumberIsConfigurable) {
  auto clock = manual_clock();
  auto limiter = default_controller_rate_limiter(
      {.base_delay = milliseconds(1), .max_delay = milliseconds(4), .qps = 1, .burst = 2}, clock);
  EXPECT_EQ(limiter->when("a"), milliseconds(1));
  EXPECT_EQ(limiter->when("a"), milliseconds(2));
  EXPECT_EQ(limiter->when("b"), seconds(1));  // burst 2 spent; 1 per second
  clock->advance(seconds(10));
  EXPECT_EQ(limiter->when("a"), milliseconds(4));
  EXPECT_EQ(limiter->when("a"), milliseconds(4));  // capped at max_delay
}

}  // namespace
}  // namespace kinformer::controller
