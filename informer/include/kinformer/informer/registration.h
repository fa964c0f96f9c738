#pragma once
// Registration: the RAII handle of one handler on one informer.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "kinformer/informer/handle.h"

namespace kinformer::informer {

class SharedInformer;
namespace detail {
class Listener;
}

/// Keeps one handler registered (a Handle). Move-only; closing or destroying it removes exactly
/// that handler (never the informer, never another handler). active() is false after close().
///
/// close() is idempotent and safe from any thread, including from inside the handler's own
/// callback. When close() returns, no callback of this handler is running or will run — except,
/// when close() is called from inside a callback, that callback itself, which finishes normally.
/// close() from outside waits for a running callback of this handler to return; so does every
/// one of several concurrent close() calls, and so does a close() from another handler's
/// callback, also when this handler's callback is itself closing a third handler (a chain of
/// closes is waited for to its end). One exception: handlers whose callbacks close each other
/// in a cycle (A closes B while B closes A) would wait for ever: a close() that finds itself in
/// such a cycle returns without waiting (the other callback is still inside its own close(),
/// which then returns too once this callback has returned).
///
/// Lifetime: may outlive the informer and the factory (closing is then a no-op).
/// Thread-safety: close(), has_synced() and the accessors may be called concurrently; moving
/// or assigning must not race with other calls on the same object.
class [[nodiscard]] Registration : public Handle {
 public:
  Registration() = default;

  /// True once this handler received every notification of the informer's initial list (or, for
  /// a handler added after sync, the synthetic adds of the contents at registration).
  [[nodiscard]] bool has_synced() const;
  /// Waits (real time) until has_synced(), the registration is closed, or the timeout; returns
  /// has_synced(). Not from inside this handler's own callback (it would wait for itself).
  bool wait_for_sync(std::chrono::milliseconds timeout) const;
  /// Unique per process; the "id" label of this handler's metrics.
  [[nodiscard]] std::uint64_t id() const;
  /// Notifications waiting for this handler (after coalescing).
  [[nodiscard]] std::size_t queue_depth() const;
  /// Exceptions thrown by this handler's callbacks (caught and counted).
  [[nodiscard]] std::uint64_t exceptions() const;

 private:
  friend class SharedInformer;
  class Registered;  // the Closable: one handler on one informer
  Registration(std::weak_ptr<SharedInformer> informer, std::shared_ptr<detail::Listener> listener);
  [[nodiscard]] std::shared_ptr<detail::Listener> listener() const;
};

}  // namespace kinformer::informer
