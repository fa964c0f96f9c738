#pragma once
// TypedInformer<T>: a thin typed handle over a SharedInformer.

#include <functional>
#include <memory>

#include "kinformer/cache/typed_store.h"
#include "kinformer/informer/shared_informer.h"

namespace kinformer::informer {

/// A typed, copyable, non-owning handle: valid while the owning InformerFactory lives.
/// Thread-safety: as SharedInformer.
template <typename T>
class TypedInformer {
 public:
  using Ptr = std::shared_ptr<const T>;

  explicit TypedInformer(SharedInformer& informer) : informer_(&informer) {}

  /// Typed callbacks; unset ones ignore the notification. See SharedInformer::add_handler.
  struct Handler {
    std::function<void(const Ptr&, bool is_initial_list)> add;
    std::function<void(const Ptr& old_object, const Ptr& new_object)> update;
    std::function<void(const Ptr&, bool final_state_unknown)> del;
  };

  Registration add_handler(Handler h, HandlerOptions options = {}) {
    auto funcs = std::make_shared<ResourceEventHandlerFuncs>();
    if (h.add) {
      funcs->add = [f = std::move(h.add)](const client::ObjectPtr& o, bool i) { f(cast(o), i); };
    }
    if (h.update) {
      funcs->update = [f = std::move(h.update)](const client::ObjectPtr& o,
                                                const client::ObjectPtr& n) {
        f(cast(o), cast(n));
      };
    }
    if (h.del) {
      funcs->del = [f = std::move(h.del)](const client::ObjectPtr& o, bool u) { f(cast(o), u); };
    }
    return informer_->add_handler(std::move(funcs), std::move(options));
  }
  Registration add_handler(ResourceEventHandlerPtr handler, HandlerOptions options = {}) {
    return informer_->add_handler(std::move(handler), std::move(options));
  }

  [[nodiscard]] cache::TypedStore<T> store() const {
    return cache::TypedStore<T>(informer_->store_ptr());
  }
  [[nodiscard]] bool has_synced() const { return informer_->has_synced(); }
  [[nodiscard]] std::size_t handler_count() const { return informer_->handler_count(); }
  [[nodiscard]] SharedInformer& untyped() const noexcept { return *informer_; }

  static Ptr cast(const client::ObjectPtr& o) { return std::static_pointer_cast<const T>(o); }

 private:
  SharedInformer* informer_;
};

}  // namespace kinformer::informer
