// The metric families one kind of controller object (work queues, leader electors) registers
// once per registry backend and shares among its objects, each object under a name of its own.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "kinformer/informer/metrics_registry.h"

namespace kinformer::controller::detail {

// Families: made from the registry, with members `registry` (that shared_ptr) and `names` (the
// names that have series in it). Every call is made holding mu.
template <class Families>
class FamiliesByBackend {
 public:
  std::mutex mu;  // guards the map and every Families::names

  // The families of registry's backend (made on first use) with `name` taken in them; null when
  // an object of that name already has them.
  std::shared_ptr<Families> acquire(std::shared_ptr<informer::MetricsRegistry> registry,
                                    const std::string& name) {
    const void* key = registry->backend();
    auto& weak = by_backend_[key];
    auto families = weak.lock();
    if (!families) {
      try {
        families = std::make_shared<Families>(std::move(registry));
      } catch (...) {
        by_backend_.erase(key);  // no families were made: no entry either
        throw;
      }
      weak = families;
    }
    if (!families->names.insert(name).second) return nullptr;
    return families;
  }

  // `name` is free again and `families` is dropped here, under mu (so that its count is exact);
  // the families are forgotten with their last user (they keep the registry alive, so a
  // backend's address is never reused while its entry is live).
  void release(std::shared_ptr<Families>& families, const std::string& name) {
    families->names.erase(name);
    auto it = by_backend_.find(families->registry->backend());
    if (families.use_count() == 1 && it != by_backend_.end()) by_backend_.erase(it);
    families.reset();
  }

  [[nodiscard]] std::size_t size() const { return by_backend_.size(); }

 private:
  std::map<const void*, std::weak_ptr<Families>> by_backend_;
};

}  // namespace kinformer::controller::detail
