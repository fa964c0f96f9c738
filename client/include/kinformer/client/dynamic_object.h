#pragma once
// DynamicObject: any resource, kept as ObjectMeta plus its JSON text.

#include <string>

#include "kinformer/client/object.h"
#include "kinformer/client/resource.h"

namespace kinformer::client {

/// Any object, for resources without a typed model. `json` is the whole object as the server
/// sent it, minus metadata.managedFields. Encoding for create/update sends `json` unchanged.
/// Decoding a value nested deeper than kMaxJsonDepth is an Errc::decode error.
/// Thread-safety: immutable once stored, like every Object.
class DynamicObject final : public Object {
 public:
  std::string json;
};

/// A ResourceType for `gvr` whose objects decode as DynamicObject (dynamic_codec()).
ResourceType dynamic_resource(GroupVersionResource gvr);

}  // namespace kinformer::client
