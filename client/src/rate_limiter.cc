#include "kinformer/client/rate_limiter.h"

#include <algorithm>
#include <cmath>

namespace kinformer::client {
namespace {

RateLimiterOptions validated(RateLimiterOptions options) {
  if (!std::isfinite(options.qps)) {
    throw ConfigError("rate limiter: qps must be a finite number (<= 0 disables limiting)");
  }
  options.burst = std::max(options.burst, 1);
  return options;
}

}  // namespace

RateLimiter::RateLimiter(Options options, ClockPtr clock)
    : options_(validated(options)),
      clock_(clock ? std::move(clock) : system_clock()),
      bucket_(options_.burst, options_.qps, clock_) {}

bool RateLimiter::try_acquire() {
  if (options_.qps <= 0) return true;
  std::lock_guard lock(mu_);
  return bucket_.try_take();
}

std::chrono::nanoseconds RateLimiter::reserve() {
  if (options_.qps <= 0) return std::chrono::nanoseconds(0);
  std::lock_guard lock(mu_);
  return std::chrono::duration_cast<std::chrono::nanoseconds>(bucket_.reserve());
}

Status RateLimiter::acquire(const std::stop_token& stop) {
  auto cancelled = [] {
    return Error::make(
        Errc::cancelled,
        "rate limiter wait cancelled: the client is shutting down or the caller stopped");
  };
  if (stop.stop_requested()) return cancelled();
  auto wait = reserve();
  if (wait.count() > 0) {
    struct Waiting {
      std::atomic<std::size_t>& n;
      explicit Waiting(std::atomic<std::size_t>& count) : n(count) { ++n; }
      ~Waiting() { --n; }
    } waiting(waiting_);
    clock_->sleep_for(wait, stop);
  }
  if (stop.stop_requested()) return cancelled();
  return Ok{};
}

}  // namespace kinformer::client
