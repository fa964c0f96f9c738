// Helpers several client tests use under one name: the Pod resource, typed and dynamic, and JSON
// text on one line. Defined once here, as the files of a test program may share a unity source.
#pragma once

#include <algorithm>
#include <string>

#include "kinformer/client/dynamic_object.h"
#include "kinformer/client/pod.h"

namespace kinformer::client {

inline const ResourceType& pods() { return ResourceTraits<Pod>::type(); }

inline const ResourceType kPods = dynamic_resource({"", "v1", "pods", "Pod", true});

inline std::string one_line(std::string json) {
  std::erase(json, '\n');
  return json;
}

}  // namespace kinformer::client
