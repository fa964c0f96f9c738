#pragma once
// Injected time: every wait in kinformer goes through a Clock, so tests are deterministic.

#include <chrono>
#include <memory>
#include <stop_token>

namespace kinformer::client {

/// A monotonic clock that can also wait. Implementations must be thread-safe.
class Clock {
 public:
  using Duration = std::chrono::steady_clock::duration;
  using TimePoint = std::chrono::steady_clock::time_point;
  virtual ~Clock() = default;
  [[nodiscard]] virtual TimePoint now() const = 0;
  /// Waits for `duration`, waking early when `stop` is requested (a condition wait, never an
  /// uninterruptible sleep). Returns false when woken by stop.
  virtual bool sleep_for(Duration duration, std::stop_token stop) = 0;
};

using ClockPtr = std::shared_ptr<Clock>;

/// The real steady clock (one instance per process). Thread-safe.
ClockPtr system_clock();

}  // namespace kinformer::client
