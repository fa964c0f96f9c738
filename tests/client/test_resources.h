// Helpers several client tests use under one name: the Pod resource, typed and dynamic, Pod JSON,
// client options and a protobuf reply of the scripted server. Defined once here, as the files of
// a test program may share a unity source.
#pragma once

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "fake_apiserver.h"
#include "kinformer/client/dynamic_object.h"
#include "kinformer/client/pod.h"
#include "kinformer/client/rest_client.h"

namespace kinformer::client {

inline const ResourceType& pods() { return ResourceTraits<Pod>::type(); }

inline const ResourceType kPods = dynamic_resource({"", "v1", "pods", "Pod", true});

inline std::string one_line(std::string json) {
  std::erase(json, '\n');
  return json;
}

/// A Pod in namespace "ns" with a name and a resourceVersion only.
inline std::string minimal_pod_json(const std::string& name, const std::string& rv) {
  return R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + name +
         R"(","namespace":"ns","resourceVersion":")" + rv + R"("}})";
}

/// No client-side rate limit, and a request timeout that ends a hung test's request.
inline RestClientOptions unlimited() {
  RestClientOptions o;
  o.rate_limit.qps = 0;
  o.request_timeout = std::chrono::seconds(5);
  return o;
}

/// A reply of `body` as kube-apiserver's protobuf.
inline testing::Reply protobuf_reply(std::string body, int status = 200) {
  testing::Reply r;
  r.status = status;
  r.headers.emplace_back("Content-Type", "application/vnd.kubernetes.protobuf");
  r.body = std::move(body);
  return r;
}

}  // namespace kinformer::client
