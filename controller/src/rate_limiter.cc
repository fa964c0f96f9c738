#include "kinformer/controller/rate_limiter.h"

#include <algorithm>
#include <cmath>

#include "kinformer/client/error.h"

namespace kinformer::controller {

// ---- ItemExponentialFailureRateLimiter ----

ItemExponentialFailureRateLimiter::ItemExponentialFailureRateLimiter(Clock::Duration base,
                                                                     Clock::Duration max)
    : base_(base), max_(max) {
  if (base < Clock::Duration::zero() || max < Clock::Duration::zero()) {
    throw client::ConfigError(
        "ItemExponentialFailureRateLimiter: base and max delay must not be negative");
  }
}

Clock::Duration ItemExponentialFailureRateLimiter::when(const std::string& key) {
  int exp = 0;
  {
    std::lock_guard lock(mu_);
    exp = failures_[key]++;
  }
  // In double, as client-go does: base * 2^exp overflows any integer long before it stops
  // growing; anything above max (infinity included) is max.
  const double backoff = static_cast<double>(base_.count()) * std::pow(2.0, exp);
  if (backoff >= static_cast<double>(max_.count())) return max_;
  return Clock::Duration(static_cast<Clock::Duration::rep>(backoff));
}

void ItemExponentialFailureRateLimiter::forget(const std::string& key) {
  std::lock_guard lock(mu_);
  failures_.erase(key);
}

int ItemExponentialFailureRateLimiter::num_requeues(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

// ---- BucketRateLimiter ----

BucketRateLimiter::BucketRateLimiter(double qps, int burst, ClockPtr clock)
    : bucket_(burst, qps, std::move(clock)) {}

Clock::Duration BucketRateLimiter::when(const std::string& /*key*/) {
  std::lock_guard lock(mu_);
  const auto wait = bucket_.reserve();
  return wait == Clock::Duration::max() ? client::TokenBucket::kMaxWait : wait;
}

void BucketRateLimiter::forget(const std::string& /*key*/) {}

int BucketRateLimiter::num_requeues(const std::string& /*key*/) { return 0; }

// ---- MaxOfRateLimiter ----

MaxOfRateLimiter::MaxOfRateLimiter(std::vector<RateLimiterPtr> limiters)
    : limiters_(std::move(limiters)) {
  if (limiters_.empty()) throw client::ConfigError("MaxOfRateLimiter: no limiters given");
  if (std::any_of(limiters_.begin(), limiters_.end(), [](const auto& l) { return !l; })) {
    throw client::ConfigError("MaxOfRateLimiter: a limiter is null");
  }
}

Clock::Duration MaxOfRateLimiter::when(const std::string& key) {
  // Every limiter counts the retry, whichever answers the longest wait.
  Clock::Duration longest = Clock::Duration::zero();
  for (const auto& l : limiters_) longest = std::max(longest, l->when(key));
  return longest;
}

void MaxOfRateLimiter::forget(const std::string& key) {
  for (const auto& l : limiters_) l->forget(key);
}

int MaxOfRateLimiter::num_requeues(const std::string& key) {
  int most = 0;
  for (const auto& l : limiters_) most = std::max(most, l->num_requeues(key));
  return most;
}

// ---- the default ----

RateLimiterPtr default_controller_rate_limiter(ControllerRateLimiterOptions options,
                                               ClockPtr clock) {
  std::vector<RateLimiterPtr> limiters;
  limiters.push_back(
      std::make_unique<ItemExponentialFailureRateLimiter>(options.base_delay, options.max_delay));
  limiters.push_back(
      std::make_unique<BucketRateLimiter>(options.qps, options.burst, std::move(clock)));
  return std::make_unique<MaxOfRateLimiter>(std::move(limiters));
}

}  // namespace kinformer::controller
