#include "kinformer/informer/reconnect_budget.h"

#include <algorithm>
#include <cmath>

namespace kinformer::informer {

ReconnectBudget::ReconnectBudget(ReconnectBudgetOptions options, ClockPtr clock)
    : options_(options),
      clock_(clock ? std::move(clock) : system_clock()),
      tokens_(options.burst),
      last_(clock_->now()) {}

void ReconnectBudget::refill() {
  auto now = clock_->now();
  if (now <= last_) return;
  double elapsed = std::chrono::duration<double>(now - last_).count();
  tokens_ = std::min(options_.burst, tokens_ + elapsed * options_.per_second);
  last_ = now;
}

Clock::Duration ReconnectBudget::reserve() {
  std::lock_guard lock(mu_);
  refill();
  tokens_ -= 1;
  if (tokens_ >= 0) return Clock::Duration::zero();
  ++denials_;
  if (options_.per_second <= 0) return std::chrono::hours(1);
  return std::chrono::duration_cast<Clock::Duration>(
      std::chrono::duration<double>(-tokens_ / options_.per_second));
}

bool ReconnectBudget::try_acquire() {
  std::lock_guard lock(mu_);
  refill();
  if (tokens_ >= 1) {
    tokens_ -= 1;
    return true;
  }
  ++denials_;
  return false;
}

std::uint64_t ReconnectBudget::denials() const {
  std::lock_guard lock(mu_);
  return denials_;
}

}  // namespace kinformer::informer
