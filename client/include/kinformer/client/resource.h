#pragma once
// Which resource an API call addresses, and how its objects are decoded.

#include <memory>
#include <string>
#include <string_view>

#include "kinformer/client/json_fwd.h"
#include "kinformer/client/object.h"
#include "kinformer/client/result.h"

namespace kinformer::client {

/// A resource: group ("" for core), version, plural resource name, whether it is namespaced,
/// and its Kind. Value type.
struct GroupVersionResource {
  std::string group;     ///< "" for the core group, e.g. "discovery.k8s.io"
  std::string version;   ///< e.g. "v1"
  std::string resource;  ///< plural, lower case, e.g. "endpointslices"
  std::string kind;      ///< e.g. "EndpointSlice" (used for encoding and messages)
  bool namespaced = true;

  /// "v1" for core, "group/version" otherwise.
  [[nodiscard]] std::string api_version() const;
  /// REST path: "/api/v1/namespaces/NS/pods/NAME", "/apis/G/V/RES" ...; `ns` empty means all
  /// namespaces (or a cluster-scoped resource), `name` empty means the collection.
  [[nodiscard]] std::string path(std::string_view ns = {}, std::string_view name = {}) const;
  /// "pods", or "discovery.k8s.io/v1/endpointslices" for non-core resources.
  [[nodiscard]] std::string to_string() const;
  bool operator==(const GroupVersionResource&) const = default;
};

/// The deepest JSON nesting the client accepts (objects and arrays; the outermost value is level
/// 1, the object of a watch event level 2). Built-in objects are shallow, but custom resources
/// (embedded OpenAPI schemas, pod templates inside custom types) nest deeper, so the bound is
/// generous (Go's encoding/json allows 10,000); it keeps a hostile server or proxy ([[[[...)
/// from overflowing the stack of recursive parsing and encoding (a few hundred KB at this depth).
/// Deeper input is an Errc::decode error saying so.
inline constexpr int kMaxJsonDepth = 1000;

/// Decodes and encodes the objects of one resource. Implementations are stateless and
/// thread-safe: no concurrent call causes a data race.
class Codec {
 public:
  virtual ~Codec() = default;
  /// Decodes one object (a JSON object value with apiVersion/kind/metadata/...). Unknown fields
  /// are ignored, missing optional fields are defaults; metadata.managedFields is never kept.
  /// A wrong shape (e.g. metadata not an object) is an Errc::decode error naming the field.
  [[nodiscard]] virtual Result<std::shared_ptr<Object>> decode(const JsonValue& value) const = 0;
  /// Encodes an object as JSON for create/update.
  [[nodiscard]] virtual std::string encode(const Object& object) const = 0;
};

/// A resource with its codec: what a ListerWatcher or an informer needs to know.
struct ResourceType {
  GroupVersionResource gvr;
  std::shared_ptr<const Codec> codec;
};

/// Typed models specialise this with `static const ResourceType& type();`.
template <typename T>
struct ResourceTraits;

/// A codec that keeps any resource as a DynamicObject (ObjectMeta + the JSON text, without
/// managedFields).
std::shared_ptr<const Codec> dynamic_codec();

}  // namespace kinformer::client
