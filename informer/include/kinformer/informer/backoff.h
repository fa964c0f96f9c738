#pragma once
// Backoff between retries: an interface and client-go's jittered exponential implementation.

#include <chrono>
#include <functional>
#include <memory>

#include "kinformer/informer/clock.h"

namespace kinformer::informer {

/// A retry delay policy. Not thread-safe: each reflector owns its own.
class Backoff {
 public:
  virtual ~Backoff() = default;
  /// The delay before the next attempt; advances the sequence.
  virtual Clock::Duration next() = 0;
  /// Starts the sequence over (e.g. after a healthy period).
  virtual void reset() = 0;
};

using BackoffPtr = std::unique_ptr<Backoff>;

/// Makes the backoff of one reflector (each owns its own: a Backoff is not thread-safe). Called
/// once per reflector, on the thread creating the informer; must not return null.
using BackoffFactory = std::function<BackoffPtr()>;

/// client-go's defaults (reflector's exponential backoff manager).
struct BackoffOptions {
  std::chrono::milliseconds initial{800};
  double factor = 2.0;
  std::chrono::milliseconds max{30'000};
  /// Each delay d becomes d * (1 + jitter * r), r uniform in [0, 1).
  double jitter = 1.0;
  /// If no delay was requested for this long, the sequence starts over at `initial`.
  std::chrono::milliseconds reset_after{120'000};
};

/// Jittered exponential backoff: base delays initial, initial*factor, ... capped at max; each
/// delay gets a jitter of up to jitter*base (so a delay may exceed max by the jitter, as in
/// client-go). Resets after `reset_after` without a call to next().
/// Not thread-safe.
class JitteredExponentialBackoff : public Backoff {
 public:
  JitteredExponentialBackoff(BackoffOptions options, ClockPtr clock, RandomSource random);
  Clock::Duration next() override;
  void reset() override;

 private:
  BackoffOptions options_;
  ClockPtr clock_;
  RandomSource random_;
  Clock::Duration current_;
  Clock::TimePoint last_{};
  bool has_last_ = false;
};

}  // namespace kinformer::informer
