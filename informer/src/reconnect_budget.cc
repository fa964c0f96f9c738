#include "kinformer/informer/reconnect_budget.h"

#include <algorithm>
#include <cmath>

namespace kinformer::informer {

ReconnectBudget::ReconnectBudget(ReconnectBudgetOptions options, ClockPtr clock)
    : options_(options),
      clock_(clock ? std::move(clock) : system_clock()),
      tokens_(options.burst),
      last_(clock_->now()),
      burst_(options.burst),
      per_second_(options.per_second) {}

void ReconnectBudget::refill() {
  auto now = clock_->now();
  if (now <= last_) return;
  double elapsed = std::chrono::duration<double>(now - last_).count();
  tokens_ = std::min(burst_, tokens_ + elapsed * per_second_);
  last_ = now;
}

void ReconnectBudget::add_informer() {
  std::lock_guard lock(mu_);
  refill();  // at the old rate, up to now
  ++informers_;
  burst_ += options_.burst_per_informer;
  per_second_ += options_.per_second_per_informer;
  tokens_ = std::min(burst_, tokens_ + options_.burst_per_informer);
}

Clock::Duration ReconnectBudget::reserve() {
  std::lock_guard lock(mu_);
  refill();
  tokens_ -= 1;
  if (tokens_ >= 0) return Clock::Duration::zero();
  ++denials_;
  if (per_second_ <= 0) return std::chrono::hours(1);
  return std::chrono::duration_cast<Clock::Duration>(std::chrono::duration<double>(-tokens_ / per_second_));
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

std::size_t ReconnectBudget::informers() const {
  std::lock_guard lock(mu_);
  return informers_;
}

double ReconnectBudget::burst() const {
  std::lock_guard lock(mu_);
  return burst_;
}

double ReconnectBudget::per_second() const {
  std::lock_guard lock(mu_);
  return per_second_;
}

}  // namespace kinformer::informer
