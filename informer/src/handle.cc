#include "kinformer/informer/handle.h"

namespace kinformer::informer {

Handle& Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    close();
    auto t = other.take();
    std::lock_guard lock(mu_);
    target_ = std::move(t);
  }
  return *this;
}

bool Handle::close() {
  // Every caller, also a second concurrent one, returns only after the registration ended: the
  // target is let go only after its close() returned.
  std::shared_ptr<Closable> t = target();
  if (!t) return true;
  const bool done = t->close();
  std::lock_guard lock(mu_);
  if (target_ == t) target_.reset();
  return done;
}

bool Handle::active() const {
  auto t = target();
  return t && t->active();
}

std::shared_ptr<Closable> Handle::target() const {
  std::lock_guard lock(mu_);
  return target_;
}

std::shared_ptr<Closable> Handle::take() noexcept {
  std::lock_guard lock(mu_);
  return std::move(target_);
}

}  // namespace kinformer::informer
