#include "kinformer/informer/registration.h"

#include "kinformer/informer/shared_informer.h"
#include "listener.h"

namespace kinformer::informer {

Registration::Registration(std::weak_ptr<SharedInformer> informer,
                           std::shared_ptr<detail::Listener> listener)
    : informer_(std::move(informer)), listener_(std::move(listener)) {}

Registration::Registration(Registration&& other) noexcept
    : informer_(std::move(other.informer_)), listener_(other.take()) {}

Registration& Registration::operator=(Registration&& other) noexcept {
  if (this != &other) {
    close();
    informer_ = std::move(other.informer_);
    auto listener = other.take();
    std::lock_guard lock(mu_);
    listener_ = std::move(listener);
  }
  return *this;
}

Registration::~Registration() { close(); }

std::shared_ptr<detail::Listener> Registration::take() {
  std::lock_guard lock(mu_);
  return std::move(listener_);
}

std::shared_ptr<detail::Listener> Registration::listener() const {
  std::lock_guard lock(mu_);
  return listener_;
}

void Registration::close() {
  // Exactly one concurrent close() takes the listener; the others return at once.
  std::shared_ptr<detail::Listener> listener = take();
  if (!listener) return;
  if (auto informer = informer_.lock()) {
    informer->remove_listener(listener);
  } else {
    listener->request_stop();
    if (!listener->on_executor_thread()) listener->join(std::chrono::hours(24 * 365));
  }
  informer_.reset();
}

bool Registration::has_synced() const {
  auto l = listener();
  return l && l->has_synced();
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
