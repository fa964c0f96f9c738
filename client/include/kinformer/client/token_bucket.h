#pragma once
// TokenBucket: the one token bucket under client::RateLimiter and informer::ReconnectBudget.

#include <chrono>

#include "kinformer/client/clock.h"
#include "kinformer/client/error.h"

namespace kinformer::client {

/// A token bucket on an injected Clock: tokens accrue at `rate` per second, at most `burst` are
/// saved up, and it starts full. A reservation takes a token whether or not one is there yet:
/// the count may go below zero, and each reservation waits for its own token in turn (reserving
/// is queueing, as with Go's rate.Limiter.Reserve); reservations are never given back.
///
/// Not thread-safe: the owner serialises every call (RateLimiter and ReconnectBudget hold a
/// mutex around it). The clock must outlive the bucket (it is shared).
class TokenBucket {
 public:
  /// The longest wait reserve() returns while tokens accrue at all (a tiny rate would otherwise
  /// ask for more than Clock::Duration holds): 100 years, which a clock can still add to now()
  /// without overflowing.
  static constexpr Clock::Duration kMaxWait = std::chrono::hours(24 * 365 * 100);

  /// `clock` null: system_clock(). A negative `burst` or `rate` counts as 0 (a rate of 0 accrues
  /// nothing). Throws ConfigError when either is not a finite number (NaN, infinity).
  TokenBucket(double burst, double rate, ClockPtr clock = nullptr);

  /// Takes a token only if one is available now.
  bool try_take();
  /// Takes the next token and returns how long until it has accrued: zero when one was
  /// available, at most kMaxWait while the rate is above 0, Clock::Duration::max() when none
  /// ever will (rate 0).
  Clock::Duration reserve();
  /// From now on the bucket holds at most `burst` and accrues at `rate`; what accrued until now
  /// did so at the old rate. Then `extra` tokens are added (capped at the new burst). The values
  /// are checked as in the constructor (and `extra` must be finite too).
  void resize(double burst, double rate, double extra = 0);

  [[nodiscard]] double burst() const noexcept { return burst_; }
  [[nodiscard]] double rate() const noexcept { return rate_; }
  /// The tokens available now; negative: that many reservations are still waiting.
  [[nodiscard]] double tokens();
  [[nodiscard]] Clock& clock() const noexcept { return *clock_; }

 private:
  void refill();  // accrues up to clock_->now()

  ClockPtr clock_;
  double burst_;
  double rate_;
  double tokens_;
  Clock::TimePoint last_;
};

}  // namespace kinformer::client
