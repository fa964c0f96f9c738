#include "kinformer/client/object.h"

#include <algorithm>

namespace kinformer::client {

namespace {

template <typename Map>
auto* find_in(const Map& map, std::string_view key) noexcept {
  auto it = std::lower_bound(
      map.begin(), map.end(), key,
      [](const auto& entry, std::string_view k) { return std::string_view(entry.first) < k; });
  return it != map.end() && std::string_view(it->first) == key ? &it->second : nullptr;
}

}  // namespace

const std::string* find_value(const StringMap& map, std::string_view key) noexcept {
  const InternedString* v = find_in(map, key);
  return v ? &v->str() : nullptr;
}

std::string make_key(std::string_view namespace_, std::string_view name) {
  if (namespace_.empty()) return std::string(name);
  std::string key;
  key.reserve(namespace_.size() + 1 + name.size());
  key.append(namespace_).append("/").append(name);
  return key;
}

std::string Object::key() const { return make_key(metadata.namespace_, metadata.name); }

}  // namespace kinformer::client
