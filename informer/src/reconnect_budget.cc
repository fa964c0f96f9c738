#include "kinformer/informer/reconnect_budget.h"

namespace kinformer::informer {

ReconnectBudget::ReconnectBudget(ReconnectBudgetOptions options, ClockPtr clock)
    : options_(options), bucket_(options.burst, options.per_second, std::move(clock)) {}

void ReconnectBudget::add_informer() {
  std::lock_guard lock(mu_);
  ++informers_;
  double burst = bucket_.burst() + options_.burst_per_informer;
  double rate = bucket_.rate() + options_.per_second_per_informer;
  bucket_.resize(burst, rate, options_.burst_per_informer);  // its share of the burst at once
}

Clock::Duration ReconnectBudget::reserve() {
  std::lock_guard lock(mu_);
  auto wait = bucket_.reserve();
  if (wait == Clock::Duration::zero()) return wait;
  ++denials_;
  if (wait == Clock::Duration::max()) return std::chrono::hours(1);  // no refill: try hourly
  return wait;
}

bool ReconnectBudget::try_acquire() {
  std::lock_guard lock(mu_);
  if (bucket_.try_take()) return true;
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
  return bucket_.burst();
}

double ReconnectBudget::per_second() const {
  std::lock_guard lock(mu_);
  return bucket_.rate();
}

}  // namespace kinformer::informer
