#pragma once
// OnceGuard: run an initialization step once, retrying after failure.

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>

#include "kinformer/client/result.h"

namespace kinformer::informer {

/// Runs a step successfully at most once.
///
/// - The first caller runs the step. Success is recorded only after the step returned ok, under
///   the guard's lock; later calls return ok without running anything.
/// - If the step fails, its error goes to that caller and nothing is recorded: the next call
///   runs the step again.
/// - Concurrent callers wait for the call in flight and see its result; if it failed, exactly one
///   of the waiters then runs the step again (the others wait for that attempt), so a failed step
///   is never run by two callers at once.
/// - If the step throws, the guard behaves as for a failure and rethrows to that caller.
///
/// Thread-safety: thread-safe. The step must not call run() on the same guard (deadlock).
class OnceGuard {
 public:
  client::Status run(const std::function<client::Status()>& step);
  [[nodiscard]] bool done() const;
  /// Callers now waiting inside run() for the step in flight (observability and tests).
  [[nodiscard]] std::size_t waiters() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;        // guarded by mu_
  bool running_ = false;     // guarded by mu_
  std::size_t waiters_ = 0;  // guarded by mu_
};

}  // namespace kinformer::informer
