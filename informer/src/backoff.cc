#include "kinformer/informer/backoff.h"

#include <algorithm>

namespace kinformer::informer {

JitteredExponentialBackoff::JitteredExponentialBackoff(BackoffOptions options, ClockPtr clock,
                                                       RandomSource random)
    : options_(options),
      clock_(clock ? std::move(clock) : system_clock()),
      random_(random ? std::move(random) : default_random()),
      current_(options.initial) {}

Clock::Duration JitteredExponentialBackoff::next() {
  auto now = clock_->now();
  if (has_last_ && now - last_ >= options_.reset_after) current_ = options_.initial;
  has_last_ = true;
  last_ = now;
  auto base = std::min<Clock::Duration>(current_, options_.max);
  auto wait = base;
  if (options_.jitter > 0) {
    wait += std::chrono::duration_cast<Clock::Duration>(base * (options_.jitter * random_()));
  }
  current_ = std::min<Clock::Duration>(
      std::chrono::duration_cast<Clock::Duration>(base * options_.factor), options_.max);
  return wait;
}

void JitteredExponentialBackoff::reset() {
  current_ = options_.initial;
  has_last_ = false;
}

}  // namespace kinformer::informer
