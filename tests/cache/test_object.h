#pragma once
// A minimal concrete Object for cache and informer tests.

#include <memory>
#include <string>

#include "kinformer/client/object.h"

namespace kinformer::testing {

class TestObject : public client::Object {
 public:
  std::string payload;
};

inline client::ObjectPtr make_object(std::string ns, std::string name, std::string rv = "1",
                                     client::StringMap labels = {}, std::string payload = {}) {
  auto o = std::make_shared<TestObject>();
  o->metadata.namespace_ = std::move(ns);
  o->metadata.name = std::move(name);
  o->metadata.resource_version = std::move(rv);
  o->metadata.labels = std::move(labels);
  o->payload = std::move(payload);
  return o;
}

inline const std::string& payload_of(const client::ObjectPtr& o) {
  return static_cast<const TestObject&>(*o).payload;
}

}  // namespace kinformer::testing
