#pragma once
// Token-bucket rate limiter for a client's non-watch requests (client-go's flowcontrol).

#include <atomic>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <stop_token>

#include "kinformer/client/clock.h"
#include "kinformer/client/result.h"
#include "kinformer/client/token_bucket.h"

namespace kinformer::client {

/// RateLimiter settings.
struct RateLimiterOptions {
  double qps = 5.0;  ///< tokens per second; <= 0 disables limiting; NaN or infinite: ConfigError
  int burst = 10;    ///< bucket size, >= 1
};

/// A TokenBucket: `qps` tokens per second, at most `burst` saved up. The defaults match
/// client-go's rest.Config (QPS 5, Burst 10), which API servers' priority-and-fairness settings
/// are tuned for; raise them for components that list many resources at start-up.
/// Watches are long-running and not limited (as in client-go).
/// Thread-safety: thread-safe; no concurrent call causes a data race.
class RateLimiter {
 public:
  using Options = RateLimiterOptions;

  /// `clock` null: system_clock(). acquire() waits with clock->sleep_for (inject a fake in tests,
  /// so waits are observable and instant). Throws ConfigError for a NaN or infinite qps.
  explicit RateLimiter(Options options = {}, ClockPtr clock = nullptr);

  /// Takes a token now if one is available.
  bool try_acquire();
  /// Reserves the next token and returns how long the caller must wait before using it
  /// (zero when one was available). Reservations are never given back.
  std::chrono::nanoseconds reserve();
  /// Blocks the calling thread until a token is available: reserve(), then the clock's
  /// sleep_for() for the returned wait when it is not zero. A stop request on `stop` ends the
  /// wait at once: the call then fails with Errc::cancelled, and the reserved token stays spent.
  /// A token already stopped fails without reserving.
  Status acquire(const std::stop_token& stop = {});

  [[nodiscard]] const Options& options() const noexcept { return options_; }
  /// acquire() calls waiting for their token right now (for tests and diagnostics).
  [[nodiscard]] std::size_t waiting() const noexcept { return waiting_.load(); }

 private:
  Options options_;
  const ClockPtr clock_;  // acquire() waits on it without mu_
  std::mutex mu_;
  TokenBucket bucket_;  // guarded by mu_
  std::atomic<std::size_t> waiting_{0};
};

}  // namespace kinformer::client
