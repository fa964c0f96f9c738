#include "kinformer/cache/store.h"

#include <mutex>

#include "kinformer/client/error.h"

namespace kinformer::cache {

Store::Store() {
  indexes_.emplace(
      std::string(kNamespaceIndex),
      Index{[](const client::Object& o) { return std::vector<std::string>{o.metadata.namespace_}; },
            {}});
}

void Store::index_insert(const Item& item, const client::Object& object) {
  for (auto& [name, index] : indexes_) {
    for (auto& v : index.fn(object)) index.values[std::move(v)].insert(&item);
  }
}

void Store::index_erase(const Item& item, const client::Object& object) {
  for (auto& [name, index] : indexes_) {
    for (const auto& v : index.fn(object)) {
      auto it = index.values.find(v);
      if (it == index.values.end()) continue;
      it->second.erase(&item);
      if (it->second.empty()) index.values.erase(it);
    }
  }
}

const Store::Index& Store::find_index(std::string_view name) const {
  auto it = indexes_.find(name);
  if (it == indexes_.end()) {
    throw client::ConfigError("store: no index named '" + std::string(name) + "'");
  }
  return it->second;
}

StoreChange Store::upsert(client::ObjectPtr object) {
  std::string key = object->key();
  std::unique_lock lock(mu_);
  auto [it, inserted] = items_.try_emplace(std::move(key), object);
  if (inserted) {
    index_insert(*it, *object);
    return {StoreChange::Type::added, nullptr, std::move(object)};
  }
  client::ObjectPtr old = std::move(it->second);
  it->second = object;
  index_erase(*it, *old);
  index_insert(*it, *object);
  return {StoreChange::Type::updated, std::move(old), std::move(object)};
}

std::optional<StoreChange> Store::remove(std::string_view key) {
  std::unique_lock lock(mu_);
  auto it = items_.find(std::string(key));
  if (it == items_.end()) return std::nullopt;
  client::ObjectPtr old = std::move(it->second);
  index_erase(*it, *old);
  items_.erase(it);
  return StoreChange{StoreChange::Type::deleted, old, old};
}

std::vector<StoreChange> Store::replace(std::vector<client::ObjectPtr> items,
                                        std::string resource_version) {
  Items next;
  next.reserve(items.size());
  for (auto& o : items) {
    if (o) next.insert_or_assign(o->key(), std::move(o));
  }
  std::vector<StoreChange> changes;
  changes.reserve(next.size());
  std::unique_lock lock(mu_);
  for (auto& [name, index] : indexes_) index.values.clear();
  for (auto& [key, old] : items_) {
    auto it = next.find(key);
    if (it == next.end()) {
      changes.push_back({StoreChange::Type::deleted, old, old});
    } else {
      changes.push_back({StoreChange::Type::updated, old, it->second});
    }
  }
  for (auto& [key, obj] : next) {
    if (!items_.contains(key)) changes.push_back({StoreChange::Type::added, nullptr, obj});
  }
  items_ = std::move(next);  // moves the nodes: the index entries below point into them
  for (const auto& item : items_) index_insert(item, *item.second);
  resource_version_ = std::move(resource_version);
  return changes;
}

client::ObjectPtr Store::get(std::string_view key) const {
  std::shared_lock lock(mu_);
  auto it = items_.find(std::string(key));
  return it == items_.end() ? nullptr : it->second;
}

std::vector<client::ObjectPtr> Store::list() const {
  std::shared_lock lock(mu_);
  std::vector<client::ObjectPtr> out;
  out.reserve(items_.size());
  for (const auto& [key, obj] : items_) out.push_back(obj);
  return out;
}

std::vector<std::string> Store::keys() const {
  std::shared_lock lock(mu_);
  std::vector<std::string> out;
  out.reserve(items_.size());
  for (const auto& [key, obj] : items_) out.push_back(key);
  return out;
}

std::vector<client::ObjectPtr> Store::list_namespace(std::string_view ns) const {
  return by_index(kNamespaceIndex, ns);
}

std::vector<client::ObjectPtr> Store::list(const LabelSelector& selector) const {
  return list(std::string_view{}, selector);
}

std::vector<client::ObjectPtr> Store::list(std::string_view ns,
                                           const LabelSelector& selector) const {
  std::vector<client::ObjectPtr> out;
  std::shared_lock lock(mu_);
  if (ns.empty()) {
    for (const auto& [key, obj] : items_) {
      if (selector.matches(obj->metadata.labels)) out.push_back(obj);
    }
    return out;
  }
  const Index& index = find_index(kNamespaceIndex);
  auto it = index.values.find(std::string(ns));
  if (it == index.values.end()) return out;
  for (const Item* item : it->second) {
    if (selector.matches(item->second->metadata.labels)) out.push_back(item->second);
  }
  return out;
}

void Store::for_each(const std::function<void(const client::ObjectPtr&)>& fn) const {
  std::shared_lock lock(mu_);
  for (const auto& [key, obj] : items_) fn(obj);
}

void Store::add_index(std::string name, IndexFunc fn) {
  std::unique_lock lock(mu_);
  if (indexes_.contains(name)) {
    throw client::ConfigError("store: index '" + name + "' already exists");
  }
  Index index{std::move(fn), {}};
  for (const auto& item : items_) {
    for (auto& v : index.fn(*item.second)) index.values[std::move(v)].insert(&item);
  }
  indexes_.emplace(std::move(name), std::move(index));
}

bool Store::has_index(std::string_view name) const {
  std::shared_lock lock(mu_);
  return indexes_.find(name) != indexes_.end();
}

std::vector<client::ObjectPtr> Store::by_index(std::string_view name,
                                               std::string_view value) const {
  std::shared_lock lock(mu_);
  const Index& index = find_index(name);
  std::vector<client::ObjectPtr> out;
  auto it = index.values.find(std::string(value));
  if (it == index.values.end()) return out;
  out.reserve(it->second.size());
  for (const Item* item : it->second) out.push_back(item->second);
  return out;
}

std::vector<std::string> Store::index_values(std::string_view name) const {
  std::shared_lock lock(mu_);
  const Index& index = find_index(name);
  std::vector<std::string> out;
  out.reserve(index.values.size());
  for (const auto& [v, keys] : index.values) out.push_back(v);
  return out;
}

std::size_t Store::size() const {
  std::shared_lock lock(mu_);
  return items_.size();
}

std::string Store::resource_version() const {
  std::shared_lock lock(mu_);
  return resource_version_;
}

void Store::set_resource_version(std::string resource_version) {
  std::unique_lock lock(mu_);
  resource_version_ = std::move(resource_version);
}

}  // namespace kinformer::cache
