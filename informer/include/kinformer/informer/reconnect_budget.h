#pragma once
// ReconnectBudget: a per-process token bucket that spreads reconnects and relists.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "kinformer/client/token_bucket.h"
#include "kinformer/informer/clock.h"

namespace kinformer::informer {

/// The bucket's size grows with the number of informers it serves (add_informer()):
///   burst(n)      = burst + burst_per_informer * n
///   per_second(n) = per_second + per_second_per_informer * n
/// so that n informers can never send more than burst(n) + per_second(n) * t reconnects and
/// relists in any t seconds, whatever the server does, and yet the bucket is not what keeps
/// them stale after an API-server restart.
///
/// Why these defaults (docs/BENCHMARKS.md "Reconnect storm", docs/decisions.md): after a
/// restart every informer needs about two requests, its rewatch (which gets 410: the new
/// server's watch cache starts after the old resourceVersions) and its relist, besides the
/// retries its own jittered backoff spaces while the server is down. A fixed bucket makes that
/// O(n) seconds for n informers. With 2 per informer and 0.5/s per informer, 50 informers have
/// 110 at once and 27/s, more than a restart needs; a loop without backoff (a rewatch after
/// each clean end, a relist after each 410) is held to 0.5/s per informer once its share of the
/// burst is spent.
struct ReconnectBudgetOptions {
  double burst = 10;
  double per_second = 2;
  double burst_per_informer = 2;
  double per_second_per_informer = 0.5;
};

/// A TokenBucket shared by every informer of one client (one InformerFactory), sized by the
/// number of informers (see ReconnectBudgetOptions). Each reconnect or relist reserves one token;
/// when the bucket is empty the reservation is still granted but the caller must wait until the
/// token has accrued (reservations queue fairly, like Go's rate.Limiter.Reserve) — such a
/// reservation counts as a denial. Thread-safe: no concurrent call causes a data race.
class ReconnectBudget {
 public:
  ReconnectBudget(ReconnectBudgetOptions options, ClockPtr clock);

  /// One more informer shares the bucket: burst and rate grow by the per-informer amounts, and
  /// the new informer's share of the burst is available at once.
  void add_informer();
  /// Takes one token; returns how long the caller must wait before using it (zero if available).
  Clock::Duration reserve();
  /// Takes a token only if one is available now.
  bool try_acquire();
  /// Number of reservations that had to wait (or try_acquire() that failed).
  [[nodiscard]] std::uint64_t denials() const;
  [[nodiscard]] const ReconnectBudgetOptions& options() const noexcept { return options_; }
  /// Informers added so far.
  [[nodiscard]] std::size_t informers() const;
  /// The current size of the bucket: burst + burst_per_informer * informers().
  [[nodiscard]] double burst() const;
  /// The current refill rate: per_second + per_second_per_informer * informers().
  [[nodiscard]] double per_second() const;

 private:
  ReconnectBudgetOptions options_;
  mutable std::mutex mu_;
  client::TokenBucket bucket_;  // guarded by mu_: burst() and rate() are the grown ones
  std::uint64_t denials_ = 0;   // guarded by mu_
  std::size_t informers_ = 0;   // guarded by mu_
};

using ReconnectBudgetPtr = std::shared_ptr<ReconnectBudget>;

}  // namespace kinformer::informer
