#include "kinformer/cache/store.h"

#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <utility>

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

namespace {

// FNV-1a over the key's bytes, fed in pieces so an object's key is never built.
constexpr std::uint64_t kFnvOffset = 14695981039346656037ULL;
constexpr std::uint64_t kFnvPrime = 1099511628211ULL;

std::uint64_t fnv(std::uint64_t h, std::string_view bytes) noexcept {
  for (unsigned char c : bytes) h = (h ^ c) * kFnvPrime;
  return h;
}

// Whether two (namespace, name) pairs make the same key. Equal namespace lengths settle it
// directly; otherwise only a '/' inside a name (which the API server refuses) can make the keys
// equal, and they are compared character by character, so entry-entry equality always agrees
// with key lookup.
bool same_key(std::string_view ns1, std::string_view name1, std::string_view ns2,
              std::string_view name2) noexcept {
  if (ns1.size() == ns2.size()) return ns1 == ns2 && name1 == name2;
  auto length = [](std::string_view ns, std::string_view name) {
    return (ns.empty() ? 0 : ns.size() + 1) + name.size();
  };
  auto at = [](std::string_view ns, std::string_view name, std::size_t i) {
    if (!ns.empty()) {
      if (i < ns.size()) return ns[i];
      if (i == ns.size()) return '/';
      i -= ns.size() + 1;
    }
    return name[i];
  };
  const std::size_t n = length(ns1, name1);
  if (n != length(ns2, name2)) return false;
  for (std::size_t i = 0; i < n; ++i) {
    if (at(ns1, name1, i) != at(ns2, name2, i)) return false;
  }
  return true;
}

bool key_is(std::string_view key, std::string_view ns, std::string_view name) noexcept {
  if (ns.empty()) return key == name;
  return key.size() == ns.size() + 1 + name.size() && key.starts_with(ns) &&
         key[ns.size()] == '/' && key.ends_with(name);
}

}  // namespace

std::size_t Store::ItemHash::operator()(const Item& item) const noexcept {
  const client::ObjectMeta& m = item.object->metadata;
  std::uint64_t h = kFnvOffset;
  if (!m.namespace_.empty()) h = fnv(fnv(h, m.namespace_), "/");
  return static_cast<std::size_t>(fnv(h, m.name));
}

std::size_t Store::ItemHash::operator()(std::string_view key) const noexcept {
  return static_cast<std::size_t>(fnv(kFnvOffset, key));
}

bool Store::ItemEq::operator()(const Item& a, const Item& b) const noexcept {
  const client::ObjectMeta& x = a.object->metadata;
  const client::ObjectMeta& y = b.object->metadata;
  return same_key(x.namespace_, x.name, y.namespace_, y.name);
}

bool Store::ItemEq::operator()(std::string_view key, const Item& item) const noexcept {
  const client::ObjectMeta& m = item.object->metadata;
  return key_is(key, m.namespace_, m.name);
}

const Store::Index& Store::find_index(std::string_view name) const {
  auto it = indexes_.find(name);
  if (it == indexes_.end()) {
    throw client::ConfigError("store: no index named '" + std::string(name) + "'");
  }
  return it->second;
}

StoreChange Store::upsert(client::ObjectPtr object) {
  std::unique_lock lock(mu_);
  auto [it, inserted] = items_.insert(Item{object});
  if (inserted) {
    index_insert(*it, *object);
    return {StoreChange::Type::added, nullptr, std::move(object)};
  }
  client::ObjectPtr old = std::exchange(it->object, object);  // same key: same bucket
  index_erase(*it, *old);
  index_insert(*it, *object);
  return {StoreChange::Type::updated, std::move(old), std::move(object)};
}

std::optional<StoreChange> Store::remove(std::string_view key) {
  std::unique_lock lock(mu_);
  auto it = items_.find(key);
  if (it == items_.end()) return std::nullopt;
  client::ObjectPtr old = it->object;
  index_erase(*it, *old);
  items_.erase(it);
  return StoreChange{StoreChange::Type::deleted, old, old};
}

std::vector<StoreChange> Store::replace(std::vector<client::ObjectPtr> items,
                                        std::string resource_version) {
  Items next;
  next.reserve(items.size());
  for (auto& o : items) {
    if (!o) continue;
    auto [it, inserted] = next.insert(Item{o});
    if (!inserted) it->object = std::move(o);  // the last of equal keys wins
  }
  std::vector<StoreChange> changes;
  changes.reserve(next.size());
  std::unique_lock lock(mu_);
  for (auto& [name, index] : indexes_) index.values.clear();
  for (const Item& old : items_) {
    auto it = next.find(old);
    if (it == next.end()) {
      changes.push_back({StoreChange::Type::deleted, old.object, old.object});
    } else {
      changes.push_back({StoreChange::Type::updated, old.object, it->object});
    }
  }
  for (const Item& item : next) {
    if (!items_.contains(item)) changes.push_back({StoreChange::Type::added, nullptr, item.object});
  }
  items_ = std::move(next);  // moves the nodes: the index entries below point into them
  for (const auto& item : items_) index_insert(item, *item.object);
  resource_version_ = std::move(resource_version);
  return changes;
}

client::ObjectPtr Store::get(std::string_view key) const {
  std::shared_lock lock(mu_);
  auto it = items_.find(key);
  return it == items_.end() ? nullptr : it->object;
}

std::vector<client::ObjectPtr> Store::list() const {
  std::shared_lock lock(mu_);
  std::vector<client::ObjectPtr> out;
  out.reserve(items_.size());
  for (const Item& item : items_) out.push_back(item.object);
  return out;
}

std::vector<std::string> Store::keys() const {
  std::shared_lock lock(mu_);
  std::vector<std::string> out;
  out.reserve(items_.size());
  for (const Item& item : items_) out.push_back(item.object->key());
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
    for (const Item& item : items_) {
      if (selector.matches(item.object->metadata.labels)) out.push_back(item.object);
    }
    return out;
  }
  const Index& index = find_index(kNamespaceIndex);
  auto it = index.values.find(std::string(ns));
  if (it == index.values.end()) return out;
  for (const Item* item : it->second) {
    if (selector.matches(item->object->metadata.labels)) out.push_back(item->object);
  }
  return out;
}

void Store::for_each(const std::function<void(const client::ObjectPtr&)>& fn) const {
  std::shared_lock lock(mu_);
  for (const Item& item : items_) fn(item.object);
}

void Store::add_index(std::string name, IndexFunc fn) {
  std::unique_lock lock(mu_);
  if (indexes_.contains(name)) {
    throw client::ConfigError("store: index '" + name + "' already exists");
  }
  Index index{std::move(fn), {}};
  for (const auto& item : items_) {
    for (auto& v : index.fn(*item.object)) index.values[std::move(v)].insert(&item);
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
  for (const Item* item : it->second) out.push_back(item->object);
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
