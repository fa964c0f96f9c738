#include "kinformer/informer/registration.h"

#include "kinformer/informer/shared_informer.h"
#include "listener.h"

namespace kinformer::informer {

Registration::Registration(std::weak_ptr<SharedInformer> informer,
                           std::shared_ptr<detail::Listener> listener)
    : informer_(std::move(informer)), listener_(std::move(listener)) {}

Registration::Registration(Registration&& other) noexcept {
  std::lock_guard lock(other.mu_);
  informer_ = std::move(other.informer_);
  listener_ = std::move(other.listener_);
}

Registration& Registration::operator=(Registration&& other) noexcept {
  if (this != &other) {
    close();
    std::scoped_lock lock(mu_, other.mu_);
    informer_ = std::move(other.informer_);
    listener_ = std::move(other.listener_);
  }
  return *this;
}

Registration::~Registration() { close(); }

std::shared_ptr<detail::Listener> Registration::listener() const {
  std::lock_guard lock(mu_);
  return listener_;
}

void Registration::close() {
  // Every caller, also a second concurrent one, returns only after the handler was stopped and
  // its running callback (if any) returned: the listener is released only after that.
  std::shared_ptr<detail::Listener> listener;
  std::weak_ptr<SharedInformer> informer;
  {
    std::lock_guard lock(mu_);
    listener = listener_;
    informer = informer_;
  }
  if (!listener) return;
  if (auto owner = informer.lock()) {
    owner->remove_listener(listener);
  } else {
    listener->request_stop();
    if (!listener->on_executor_thread()) listener->join(std::chrono::hours(24 * 365));
  }
  std::lock_guard lock(mu_);
  if (listener_ == listener) {
    listener_.reset();
    informer_.reset();
  }
}

bool Registration::has_synced() const {
  auto l = listener();
  return l && l->has_synced();
}
bool Registration::wait_for_sync(std::chrono::milliseconds timeout) const {
  auto l = listener();
  return l && l->wait_for_sync(timeout);
}
bool Registration::active() const {
  auto l = listener();
  return l && !l->closed();
}
std::uint64_t Registration::id() const {
  auto l = listener();
  return l ? l->id() : 0;
}
std::size_t Registration::queue_depth() const {
  auto l = listener();
  return l ? l->queue_depth() : 0;
}
std::uint64_t Registration::exceptions() const {
  auto l = listener();
  return l ? l->exceptions() : 0;
}

}  // namespace kinformer::informer
