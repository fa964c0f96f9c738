#include "kinformer/client/token_bucket.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "kinformer/client/error.h"

namespace kinformer::client {
namespace {

// NaN would pass every comparison the bucket makes and switch limiting off without a word.
double checked(double value, const char* what) {
  if (!std::isfinite(value)) {
    throw ConfigError(std::string("token bucket: ") + what + " must be a finite number");
  }
  return std::max(value, 0.0);
}

}  // namespace

TokenBucket::TokenBucket(double burst, double rate, ClockPtr clock)
    : clock_(clock ? std::move(clock) : system_clock()),
      burst_(checked(burst, "burst")),
      rate_(checked(rate, "rate")),
      tokens_(burst_),
      last_(clock_->now()) {}

void TokenBucket::refill() {
  auto now = clock_->now();
  if (now <= last_) return;
  double elapsed = std::chrono::duration<double>(now - last_).count();
  tokens_ = std::min(burst_, tokens_ + elapsed * rate_);
  last_ = now;
}

bool TokenBucket::try_take() {
  refill();
  if (tokens_ < 1) return false;
  tokens_ -= 1;
  return true;
}

Clock::Duration TokenBucket::reserve() {
  refill();
  tokens_ -= 1;
  if (tokens_ >= 0) return Clock::Duration::zero();
  if (rate_ <= 0) return Clock::Duration::max();
  // Clamped in seconds, before the conversion: a cast of more than the duration holds is
  // undefined (1 token short at 1e-12/s is 1e12 s, 1e21 ns).
  const std::chrono::duration<double> wait(-tokens_ / rate_);
  if (wait >= kMaxWait) return kMaxWait;
  return std::chrono::duration_cast<Clock::Duration>(wait);
}

void TokenBucket::resize(double burst, double rate, double extra) {
  burst = checked(burst, "burst");
  rate = checked(rate, "rate");
  extra = checked(extra, "extra tokens");
  refill();  // at the old rate, up to now
  burst_ = burst;
  rate_ = rate;
  tokens_ = std::min(burst_, tokens_ + extra);
}

double TokenBucket::tokens() {
  refill();
  return tokens_;
}

}  // namespace kinformer::client
