#pragma once
// Transforms applied to objects before they are stored (and before any handler sees them).

#include <functional>
#include <string>

#include "kinformer/client/object.h"

namespace kinformer::cache {

/// A component-defined projection of an object, applied once per object before storing. The
/// client's decoders already drop metadata.managedFields; use a transform to drop further fields
/// a component does not read (e.g. Secret data of unrelated types) or to build a smaller model.
///
/// Transforms are identified by `name`: two informer requests for the same informer key must use
/// the same transform name (or both none); a mismatch is a configuration error (the factory
/// throws client::ConfigError), never a silent first-wins.
///
/// `fn` must be thread-safe and must not throw; returning nullptr drops the object (it is then
/// treated as absent). It runs on the informer's reflector thread.
struct Transform {
  std::string name;
  std::function<client::ObjectPtr(client::ObjectPtr)> fn;
};

}  // namespace kinformer::cache
