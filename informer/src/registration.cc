#include "kinformer/informer/registration.h"

#include "kinformer/informer/shared_informer.h"
#include "listener.h"

namespace kinformer::informer {

Registration::Registration(std::weak_ptr<SharedInformer> informer,
                           std::shared_ptr<detail::Listener> listener)
    : informer_(std::move(informer)), listener_(std::move(listener)) {}

Registration& Registration::operator=(Registration&& other) noexcept {
  if (this != &other) {
    close();
    informer_ = std::move(other.informer_);
    listener_ = std::move(other.listener_);
  }
  return *this;
}

Registration::~Registration() { close(); }

void Registration::close() {
  std::shared_ptr<detail::Listener> listener = std::move(listener_);
  listener_.reset();
  if (!listener) return;
  if (auto informer = informer_.lock()) {
    informer->remove_listener(listener);
  } else {
    listener->request_stop();
    if (!listener->on_executor_thread()) listener->join(std::chrono::hours(24 * 365));
  }
  informer_.reset();
}

bool Registration::has_synced() const { return listener_ && listener_->has_synced(); }
bool Registration::active() const { return listener_ && !listener_->closed(); }
std::uint64_t Registration::id() const { return listener_ ? listener_->id() : 0; }
std::size_t Registration::queue_depth() const { return listener_ ? listener_->queue_depth() : 0; }
std::uint64_t Registration::exceptions() const { return listener_ ? listener_->exceptions() : 0; }

}  // namespace kinformer::informer
