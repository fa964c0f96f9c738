#include "kinformer/client/rate_limiter.h"

#include <algorithm>

namespace kinformer::client {

RateLimiter::RateLimiter(Options options, Clock clock, Sleep sleep)
    : options_(options),
      clock_(clock ? std::move(clock) : Clock([] { return std::chrono::steady_clock::now(); })),
      sleep_(std::move(sleep)) {
  options_.burst = std::max(options_.burst, 1);
  tokens_ = options_.burst;
  last_ = clock_();
}

void RateLimiter::refill(std::chrono::steady_clock::time_point now) {
  if (now <= last_) return;
  double elapsed = std::chrono::duration<double>(now - last_).count();
  tokens_ = std::min<double>(options_.burst, tokens_ + elapsed * options_.qps);
  last_ = now;
}

bool RateLimiter::try_acquire() {
  if (options_.qps <= 0) return true;
  std::lock_guard lock(mu_);
  refill(clock_());
  if (tokens_ < 1.0) return false;
  tokens_ -= 1.0;
  return true;
}

std::chrono::nanoseconds RateLimiter::reserve() {
  if (options_.qps <= 0) return std::chrono::nanoseconds(0);
  std::lock_guard lock(mu_);
  refill(clock_());
  tokens_ -= 1.0;
  if (tokens_ >= 0) return std::chrono::nanoseconds(0);
  return std::chrono::nanoseconds(static_cast<std::int64_t>(-tokens_ / options_.qps * 1e9));
}

Status RateLimiter::acquire(std::stop_token stop) {
  auto cancelled = [] {
    return Error::make(Errc::cancelled, "rate limiter wait cancelled: the client is shutting down or the caller stopped");
  };
  if (stop.stop_requested()) return cancelled();
  auto wait = reserve();
  if (wait.count() > 0) {
    struct Waiting {
      std::atomic<std::size_t>& n;
      explicit Waiting(std::atomic<std::size_t>& count) : n(count) { ++n; }
      ~Waiting() { --n; }
    } waiting(waiting_);
    if (sleep_) {
      sleep_(wait);
    } else {
      std::unique_lock lock(mu_);
      stop_cv_.wait_for(lock, stop, wait, [] { return false; });
    }
  }
  if (stop.stop_requested()) return cancelled();
  return Ok{};
}

}  // namespace kinformer::client
