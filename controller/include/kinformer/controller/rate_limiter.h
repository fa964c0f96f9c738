#pragma once
// RateLimiter: how long a failed key waits before its next try (client-go's
// workqueue.TypedRateLimiter), and client-go's implementations and default.

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "kinformer/client/token_bucket.h"
#include "kinformer/informer/clock.h"

namespace kinformer::controller {

using Clock = informer::Clock;
using ClockPtr = informer::ClockPtr;

/// Decides how long a key waits before it is retried. WorkQueue::add_rate_limited() calls
/// when(); a controller calls WorkQueue::forget() (which calls forget()) once a key succeeded.
/// Implementations must be thread-safe: no concurrent call may cause a data race.
class RateLimiter {
 public:
  virtual ~RateLimiter() = default;
  /// Counts one more retry of `key` and returns how long it must wait (zero: at once).
  virtual Clock::Duration when(const std::string& key) = 0;
  /// Forgets `key`'s retries: its next when() starts over.
  virtual void forget(const std::string& key) = 0;
  /// The retries of `key` counted since it was last forgotten.
  [[nodiscard]] virtual int num_requeues(const std::string& key) = 0;
};

using RateLimiterPtr = std::unique_ptr<RateLimiter>;

/// Per-key exponential backoff: the n-th retry of a key (n from 0) waits base * 2^n, at most
/// `max` (client-go's ItemExponentialFailureRateLimiter). Thread-safe.
class ItemExponentialFailureRateLimiter final : public RateLimiter {
 public:
  /// Throws client::ConfigError when `base` or `max` is negative.
  ItemExponentialFailureRateLimiter(Clock::Duration base, Clock::Duration max);
  Clock::Duration when(const std::string& key) override;
  void forget(const std::string& key) override;
  [[nodiscard]] int num_requeues(const std::string& key) override;

 private:
  const Clock::Duration base_;
  const Clock::Duration max_;
  std::mutex mu_;
  std::unordered_map<std::string, int> failures_;  // guarded by mu_
};

/// An overall token bucket shared by every key: `qps` tokens per second, `burst` saved up,
/// starting full; each when() reserves a token and waits until it has accrued (client-go's
/// BucketRateLimiter over Go's rate.Limiter.Reserve). It counts no retries per key
/// (num_requeues() is 0; forget() does nothing). Thread-safe.
class BucketRateLimiter final : public RateLimiter {
 public:
  /// `clock` null: system_clock(). Throws client::ConfigError for a NaN or infinite `qps`.
  BucketRateLimiter(double qps, int burst, ClockPtr clock = nullptr);
  /// With a `qps` of 0 (nothing ever accrues) an empty bucket answers client::TokenBucket's
  /// kMaxWait (100 years).
  Clock::Duration when(const std::string& key) override;
  void forget(const std::string& key) override;
  [[nodiscard]] int num_requeues(const std::string& key) override;

 private:
  std::mutex mu_;
  client::TokenBucket bucket_;  // guarded by mu_
};

/// The longest wait of several limiters; num_requeues() is the largest of theirs; forget()
/// forgets in each (client-go's MaxOfRateLimiter). Thread-safe when each limiter is.
class MaxOfRateLimiter final : public RateLimiter {
 public:
  /// Throws client::ConfigError when `limiters` is empty or holds a null.
  explicit MaxOfRateLimiter(std::vector<RateLimiterPtr> limiters);
  Clock::Duration when(const std::string& key) override;
  void forget(const std::string& key) override;
  [[nodiscard]] int num_requeues(const std::string& key) override;

 private:
  const std::vector<RateLimiterPtr> limiters_;
};

/// The settings of default_controller_rate_limiter(): client-go's DefaultControllerRateLimiter.
struct ControllerRateLimiterOptions {
  /// Per key: the first retry waits base_delay, each next one twice as long, at most max_delay.
  Clock::Duration base_delay = std::chrono::milliseconds(5);
  Clock::Duration max_delay = std::chrono::seconds(1000);
  /// Overall: qps retries per second after a burst of `burst`.
  double qps = 10;
  int burst = 100;
};

/// client-go's DefaultControllerRateLimiter: the longer of a per-key exponential backoff (5 ms
/// doubling to 1000 s) and an overall token bucket (10 per second, burst 100), so one failing key
/// backs off on its own and many failing keys together are held to the bucket's rate.
/// `clock` null: system_clock(). Throws client::ConfigError as the limiters above do.
RateLimiterPtr default_controller_rate_limiter(ControllerRateLimiterOptions options = {},
                                               ClockPtr clock = nullptr);

}  // namespace kinformer::controller
