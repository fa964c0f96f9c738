#pragma once
// TypedStore<T>: a typed, read-only view over a Store whose objects are all of type T.

#include <memory>
#include <string_view>
#include <vector>

#include "kinformer/cache/store.h"

namespace kinformer::cache {

/// A read-only typed view of a Store holding objects of type T (the informer for
/// client::ResourceTraits<T>::type() decodes every object as T; a transform must keep that type).
/// Holds the store by shared_ptr: the view keeps the store alive.
/// Thread-safety: as Store (thread-safe); returned pointers share ownership, no copies.
template <typename T>
class TypedStore {
 public:
  using Ptr = std::shared_ptr<const T>;

  explicit TypedStore(std::shared_ptr<const Store> store) : store_(std::move(store)) {}

  [[nodiscard]] Ptr get(std::string_view key) const {
    return std::static_pointer_cast<const T>(store_->get(key));
  }
  [[nodiscard]] std::vector<Ptr> list() const { return cast(store_->list()); }
  [[nodiscard]] std::vector<Ptr> list_namespace(std::string_view ns) const {
    return cast(store_->list_namespace(ns));
  }
  [[nodiscard]] std::vector<Ptr> list(const LabelSelector& selector) const {
    return cast(store_->list(selector));
  }
  [[nodiscard]] std::vector<Ptr> list(std::string_view ns, const LabelSelector& selector) const {
    return cast(store_->list(ns, selector));
  }
  [[nodiscard]] std::vector<Ptr> by_index(std::string_view name, std::string_view value) const {
    return cast(store_->by_index(name, value));
  }
  [[nodiscard]] std::size_t size() const { return store_->size(); }
  [[nodiscard]] const Store& untyped() const { return *store_; }

  /// Casts one untyped pointer (e.g. in a handler) to T.
  static Ptr cast(const client::ObjectPtr& object) {
    return std::static_pointer_cast<const T>(object);
  }

 private:
  static std::vector<Ptr> cast(const std::vector<client::ObjectPtr>& objects) {
    std::vector<Ptr> out;
    out.reserve(objects.size());
    for (const auto& o : objects) out.push_back(std::static_pointer_cast<const T>(o));
    return out;
  }
  std::shared_ptr<const Store> store_;
};

}  // namespace kinformer::cache
