#include "kinformer/informer/registration.h"

#include "kinformer/informer/shared_informer.h"
#include "listener.h"

namespace kinformer::informer {

// One handler on one informer, as a Handle closes it.
class Registration::Registered final : public Closable {
 public:
  Registered(std::weak_ptr<SharedInformer> informer, std::shared_ptr<detail::Listener> listener)
      : informer_(std::move(informer)), listener_(std::move(listener)) {}

  bool close() override {
    if (auto owner = informer_.lock()) return owner->remove_listener(listener_);
    listener_->request_stop();
    return listener_->join(std::chrono::hours(24 * 365));
  }
  [[nodiscard]] bool active() const override { return !listener_->closed(); }
  [[nodiscard]] const std::shared_ptr<detail::Listener>& listener() const { return listener_; }

 private:
  const std::weak_ptr<SharedInformer> informer_;
  const std::shared_ptr<detail::Listener> listener_;
};

Registration::Registration(std::weak_ptr<SharedInformer> informer,
                           std::shared_ptr<detail::Listener> listener)
    : Handle(std::make_shared<Registered>(std::move(informer), std::move(listener))) {}

std::shared_ptr<detail::Listener> Registration::listener() const {
  auto t = target();
  return t ? static_cast<const Registered&>(*t).listener() : nullptr;
}

bool Registration::has_synced() const {
  auto l = listener();
  return l && l->has_synced();
}
bool Registration::wait_for_sync(std::chrono::milliseconds timeout) const {
  auto l = listener();
  return l && l->wait_for_sync(timeout);
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
