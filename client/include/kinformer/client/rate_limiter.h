#pragma once
// Token-bucket rate limiter for a client's non-watch requests (client-go's flowcontrol).

#include <atomic>
#include <chrono>
#include <cstddef>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <stop_token>

#include "kinformer/client/result.h"

namespace kinformer::client {

/// RateLimiter settings.
struct RateLimiterOptions {
  double qps = 5.0;  ///< tokens per second; <= 0 disables limiting
  int burst = 10;    ///< bucket size, >= 1
};

/// A token bucket: `qps` tokens per second, at most `burst` saved up. The defaults match
/// client-go's rest.Config (QPS 5, Burst 10), which API servers' priority-and-fairness settings
/// are tuned for; raise them for components that list many resources at start-up.
/// Watches are long-running and not limited (as in client-go).
/// Thread-safety: thread-safe; no concurrent call causes a data race.
class RateLimiter {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  /// Blocks the calling thread for the given duration (acquire()'s wait).
  using Sleep = std::function<void(std::chrono::nanoseconds)>;
  using Options = RateLimiterOptions;

  /// `clock` defaults to std::chrono::steady_clock::now and `sleep` to a wait that a stop
  /// request ends early (inject fakes in tests, so waits are observable and instant).
  explicit RateLimiter(Options options = {}, Clock clock = {}, Sleep sleep = {});

  /// Takes a token now if one is available.
  bool try_acquire();
  /// Reserves the next token and returns how long the caller must wait before using it
  /// (zero when one was available). Reservations are never given back.
  std::chrono::nanoseconds reserve();
  /// Blocks the calling thread until a token is available: reserve(), then sleep() for the
  /// returned wait when it is not zero. A stop request on `stop` ends the wait at once (the
  /// default sleep waits on the token; an injected Sleep is checked when it returns): the call
  /// then fails with Errc::cancelled, and the reserved token stays spent. A token already stopped
  /// fails without reserving.
  Status acquire(std::stop_token stop = {});

  [[nodiscard]] const Options& options() const noexcept { return options_; }
  /// acquire() calls waiting for their token right now (for tests and diagnostics).
  [[nodiscard]] std::size_t waiting() const noexcept { return waiting_.load(); }

 private:
  void refill(std::chrono::steady_clock::time_point now);

  Options options_;
  Clock clock_;
  Sleep sleep_;
  std::mutex mu_;
  std::condition_variable_any stop_cv_;  // the default sleep waits on it (with mu_), for stops
  std::atomic<std::size_t> waiting_{0};
  double tokens_;  // may go negative: outstanding reservations
  std::chrono::steady_clock::time_point last_;
};

}  // namespace kinformer::client
