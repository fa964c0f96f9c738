#pragma once
// Handle: the one RAII handle type of kinformer. A handler on an informer (Registration), a
// cluster subscription, a watch on an endpoint subset and an endpoint subscriber are each a
// Handle on a Closable of their own.

#include <memory>
#include <mutex>

namespace kinformer::informer {

/// What a Handle ends: one registration.
class Closable {
 public:
  virtual ~Closable() = default;
  /// Ends the registration. Idempotent, and safe to call concurrently: every call returns after
  /// the registration ended, or returns false when it gave up waiting for a running callback
  /// (the registration's own rule says when, e.g. a close timeout).
  virtual bool close() = 0;
  /// False once closed (or ended by its owner).
  [[nodiscard]] virtual bool active() const = 0;
};

/// Move-only ownership of one registration: destroying or closing the handle closes exactly that
/// registration (never what it is registered on). A default-constructed or closed handle holds
/// nothing. May outlive what the registration was made on (closing is then cheap or a no-op, as
/// the Closable decides).
///
/// Thread-safety: close(), active() and the accessors of a derived handle may be called
/// concurrently, also from inside the registration's own callback; moving or assigning must
/// not race with other calls on the same object.
class Handle {
 public:
  Handle() = default;
  explicit Handle(std::shared_ptr<Closable> target) : target_(std::move(target)) {}
  Handle(Handle&& other) noexcept : target_(other.take()) {}
  /// Closes what this handle held first.
  Handle& operator=(Handle&& other) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { close(); }

  /// Closes the registration (idempotent); every concurrent call returns after it ended (or
  /// after the registration's own rule let it stop waiting: a close from inside the callback, a
  /// cycle of handlers closing each other). Returns what the registration's close says: false
  /// when it gave up waiting for a running callback after a timeout (a Subscription also from
  /// inside its own callback), else true (also for an empty handle).
  bool close();
  [[nodiscard]] bool active() const;

 protected:
  /// What the handle holds now (null when empty or closed).
  [[nodiscard]] std::shared_ptr<Closable> target() const;

 private:
  std::shared_ptr<Closable> take() noexcept;

  mutable std::mutex mu_;
  std::shared_ptr<Closable> target_;  // guarded by mu_
};

}  // namespace kinformer::informer
