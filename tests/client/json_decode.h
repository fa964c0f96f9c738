#pragma once
// Test support: a typed model decoded from JSON text through its ResourceType's codec, as the
// client decodes one object of a response.
#include <rapidjson/document.h>

#include <memory>
#include <string>

#include "kinformer/client/resource.h"

namespace kinformer::client {

template <typename T>
Result<std::shared_ptr<Object>> decode(const std::string& json) {
  rapidjson::Document doc;
  doc.Parse(json.c_str());
  return ResourceTraits<T>::type().codec->decode(doc);
}

}  // namespace kinformer::client
