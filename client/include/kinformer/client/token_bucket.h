#pragma once
// TokenBucket: the one token bucket under client::RateLimiter and informer::ReconnectBudget.

#include "kinformer/client/clock.h"

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
  /// `clock` null: system_clock(). `burst` and `rate` are used as given (the owner validates);
  /// a rate <= 0 accrues nothing.
  TokenBucket(double burst, double rate, ClockPtr clock = nullptr);

  /// Takes a token only if one is available now.
  bool try_take();
  /// Takes the next token and returns how long until it has accrued: zero when one was
  /// available, Clock::Duration::max() when none ever will (rate <= 0).
  Clock::Duration reserve();
  /// From now on the bucket holds at most `burst` and accrues at `rate`; what accrued until now
  /// did so at the old rate. Then `extra` tokens are added (capped at the new burst).
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
