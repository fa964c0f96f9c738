#pragma once
// The object model shared by every component: ObjectMeta, the Object base that typed models
// (Pod, Secret, Endpoints, EndpointSlice) and DynamicObject derive from.

#if __cplusplus < 202002L
#error "kinformer needs C++20 or later (-std=c++20); the CMake targets ask for it themselves"
#endif

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kinformer/client/byte_map.h"
#include "kinformer/client/interned_string.h"
#include "kinformer/client/timestamp.h"
#include "kinformer/client/uid.h"

namespace kinformer::client {

/// Labels or annotations: a vector of (key, value) sorted by key. Smaller than a std::map for the
/// handful of entries objects carry, and ordered for deterministic output. Keys and values are
/// interned: the same labels repeat across the Pods of a workload.
using StringMap = std::vector<std::pair<InternedString, InternedString>>;

/// Looks up `key` in a sorted StringMap; nullptr when absent. The value lives as long as the map
/// holds it.
const std::string* find_value(const StringMap& map, std::string_view key) noexcept;

/// metadata.ownerReferences[i].
/// Interned: the Pods of one ReplicaSet share the same owner.
struct OwnerReference {
  InternedString api_version;
  InternedString kind;
  InternedString name;
  InternedString uid;
  bool controller = false;
  bool block_owner_deletion = false;
  bool operator==(const OwnerReference&) const = default;
};

/// A reference to another object (core/v1 ObjectReference, e.g. an endpoint's targetRef); only
/// the fields mesh components read.
struct ObjectReference {
  InternedString kind;
  InternedString namespace_;
  std::string name;
  Uid uid;
  bool operator==(const ObjectReference&) const = default;
};

/// The parts of metadata that kinformer keeps (managedFields is never kept).
struct ObjectMeta {
  std::string name;
  InternedString namespace_;  ///< empty for cluster-scoped objects
  Uid uid;
  std::string resource_version;
  InternedString generate_name;
  std::int64_t generation = 0;
  StringMap labels;
  StringMap annotations;
  std::vector<OwnerReference> owner_references;
  std::vector<InternedString> finalizers;
  Timestamp creation_timestamp;                 ///< empty when the server sent none
  std::optional<Timestamp> deletion_timestamp;  ///< set while the object is being deleted
  bool operator==(const ObjectMeta&) const = default;
};

/// Base of every object kinformer caches. Held as std::shared_ptr<const Object> once stored:
/// immutable after decoding, shared by the store, every handler and every reader without copies.
/// Thread-safety: immutable objects may be read from any thread.
class Object {
 public:
  virtual ~Object() = default;

  ObjectMeta metadata;

  /// The cache key: "namespace/name", or "name" for cluster-scoped objects (client-go's
  /// MetaNamespaceKeyFunc).
  [[nodiscard]] std::string key() const;

 protected:
  Object() = default;
  Object(const Object&) = default;
  Object& operator=(const Object&) = default;
};

using ObjectPtr = std::shared_ptr<const Object>;

/// Builds the cache key for a namespace and name.
std::string make_key(std::string_view namespace_, std::string_view name);

}  // namespace kinformer::client
