#pragma once
// core/v1 Secret.

#include <string>

#include "kinformer/client/object.h"
#include "kinformer/client/resource.h"

namespace kinformer::client {

/// A Secret with its data decoded from base64. The data is secret: never log it (kinformer
/// never does). Thread-safety: immutable once stored.
class Secret final : public Object {
 public:
  InternedString type;  ///< e.g. "Opaque", "kubernetes.io/tls"
  /// data: key -> decoded bytes, sorted by key.
  ByteMap data;
};

template <>
struct ResourceTraits<Secret> {
  static const ResourceType& type();
};

}  // namespace kinformer::client
