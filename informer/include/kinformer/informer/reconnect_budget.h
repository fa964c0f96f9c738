#pragma once
// ReconnectBudget: a per-process token bucket that spreads reconnects and relists.

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>

#include "kinformer/informer/clock.h"

namespace kinformer::informer {

/// Defaults: a burst of 10 reconnects, refilled at 2 per second. After an API-server restart,
/// 100 informers therefore reconnect over ~45 s instead of at once.
struct ReconnectBudgetOptions {
  double burst = 10;
  double per_second = 2;
};

/// A token bucket shared by every informer of one client (one InformerFactory). Each reconnect or
/// relist reserves one token; when the bucket is empty the reservation is still granted but the
/// caller must wait until the token has accrued (reservations queue fairly, like Go's
/// rate.Limiter.Reserve) — such a reservation counts as a denial.
/// Thread-safe: no concurrent call causes a data race.
class ReconnectBudget {
 public:
  ReconnectBudget(ReconnectBudgetOptions options, ClockPtr clock);

  /// Takes one token; returns how long the caller must wait before using it (zero if available).
  Clock::Duration reserve();
  /// Takes a token only if one is available now.
  bool try_acquire();
  /// Number of reservations that had to wait (or try_acquire() that failed).
  [[nodiscard]] std::uint64_t denials() const;
  [[nodiscard]] const ReconnectBudgetOptions& options() const noexcept { return options_; }

 private:
  void refill();  // mu_ held

  ReconnectBudgetOptions options_;
  ClockPtr clock_;
  mutable std::mutex mu_;
  double tokens_;                // guarded by mu_ (may go negative: queued reservations)
  Clock::TimePoint last_;        // guarded by mu_
  std::uint64_t denials_ = 0;    // guarded by mu_
};

using ReconnectBudgetPtr = std::shared_ptr<ReconnectBudget>;

}  // namespace kinformer::informer
