#pragma once
// Registration: the RAII handle of one handler on one informer.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

namespace kinformer::informer {

class SharedInformer;
namespace detail {
class Listener;
}

/// Keeps one handler registered. Move-only; closing or destroying it removes exactly that
/// handler (never the informer, never another handler).
///
/// close() is idempotent and safe from any thread, including from inside the handler's own
/// callback. When close() returns, no callback of this handler is running or will run — except,
/// when close() is called from inside a callback, that callback itself, which finishes normally.
/// close() from outside waits for a running callback of this handler to return; so does every
/// one of several concurrent close() calls.
///
/// Lifetime: may outlive the informer and the factory (closing is then a no-op).
/// Thread-safety: close(), has_synced() and the accessors may be called concurrently; moving
/// or assigning must not race with other calls on the same object.
class [[nodiscard]] Registration {
 public:
  Registration() = default;
  Registration(Registration&& other) noexcept;
  /// Closes the current registration first.
  Registration& operator=(Registration&& other) noexcept;
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;
  ~Registration();

  void close();
  /// True once this handler received every notification of the informer's initial list (or, for
  /// a handler added after sync, the synthetic adds of the contents at registration).
  [[nodiscard]] bool has_synced() const;
  /// Waits (real time) until has_synced(), the registration is closed, or the timeout; returns
  /// has_synced(). Not from inside this handler's own callback (it would wait for itself).
  bool wait_for_sync(std::chrono::milliseconds timeout) const;
  /// False after close() (or for a default-constructed Registration).
  [[nodiscard]] bool active() const;
  /// Unique per process; the "id" label of this handler's metrics.
  [[nodiscard]] std::uint64_t id() const;
  /// Notifications waiting for this handler (after coalescing).
  [[nodiscard]] std::size_t queue_depth() const;
  /// Exceptions thrown by this handler's callbacks (caught and counted).
  [[nodiscard]] std::uint64_t exceptions() const;

 private:
  friend class SharedInformer;
  Registration(std::weak_ptr<SharedInformer> informer, std::shared_ptr<detail::Listener> listener);

  std::shared_ptr<detail::Listener> listener() const;  // copies listener_ under mu_

  // close() and the accessors may run concurrently on one Registration.
  mutable std::mutex mu_;
  std::weak_ptr<SharedInformer> informer_;      // guarded by mu_
  std::shared_ptr<detail::Listener> listener_;  // guarded by mu_
};

}  // namespace kinformer::informer
