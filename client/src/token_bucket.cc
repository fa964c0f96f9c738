#include "kinformer/client/token_bucket.h"

#include <algorithm>

namespace kinformer::client {

TokenBucket::TokenBucket(double burst, double rate, ClockPtr clock)
    : clock_(clock ? std::move(clock) : system_clock()),
      burst_(burst),
      rate_(rate),
      tokens_(burst),
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
  return std::chrono::duration_cast<Clock::Duration>(
      std::chrono::duration<double>(-tokens_ / rate_));
}

void TokenBucket::resize(double burst, double rate, double extra) {
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
