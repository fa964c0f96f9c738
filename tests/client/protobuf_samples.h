#pragma once
// Test support: the same objects as JSON and as protobuf (field numbers from k8s.io/api's and
// k8s.io/apimachinery's generated.proto), and a comparison of decoded models field by field.

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <string>

#include "kinformer/client/endpoint_slice.h"
#include "kinformer/client/endpoints.h"
#include "kinformer/client/pod.h"
#include "kinformer/client/secret.h"
#include "protobuf_writer.h"

namespace kinformer::testing {

template <typename T>
std::shared_ptr<const T> decode_json(const std::string& json) {
  rapidjson::Document doc;
  doc.Parse(json.c_str());
  EXPECT_FALSE(doc.HasParseError()) << json;
  auto r = client::ResourceTraits<T>::type().codec->decode(doc);
  EXPECT_TRUE(r) << r.error().to_string();
  return r ? std::dynamic_pointer_cast<const T>(r.value()) : nullptr;
}

/// A Pod with every field kinformer keeps, plus fields and unknown fields it skips.
inline std::string pod_json(std::string_view name, std::string_view rv) {
  return R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + std::string(name) +
         R"(","namespace":"ns","uid":"u-1","resourceVersion":")" + std::string(rv) +
         R"(","generateName":"web-","generation":3,
    "labels":{"app":"web","tier":"front"},"annotations":{"a.io/x":"1"},
    "ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-rs","uid":"u-rs","controller":true,"blockOwnerDeletion":true}],
    "finalizers":["f.io/one","f.io/two"],"creationTimestamp":"2024-02-29T23:59:58Z",
    "managedFields":[{"manager":"kubelet"}]},
  "spec":{"nodeName":"node-1","serviceAccountName":"sa","hostNetwork":true,
    "containers":[{"name":"app","image":"nginx:1","ports":[{"name":"http","containerPort":8080,"protocol":"TCP"},{"containerPort":9090}]},
                  {"name":"sidecar","image":"envoy:2"}]},
  "status":{"phase":"Running","podIP":"10.0.0.1","podIPs":[{"ip":"10.0.0.1"},{"ip":"fd00::1"}],"hostIP":"192.168.0.1",
    "conditions":[{"type":"PodScheduled","status":"True"},{"type":"Ready","status":"True"}]}})";
}

inline Msg pod_meta_proto(std::string_view name, std::string_view rv) {
  return Msg()
      .str(1, name)
      .str(2, "web-")
      .str(3, "ns")
      .str(4, "/self/link")  // selfLink: skipped
      .str(5, "u-1")
      .str(6, rv)
      .int64(7, 3)
      .msg(8, Msg().int64(1, 1709251198).int32(2, 123))  // 2024-02-29T23:59:58Z; nanos dropped
      .entry(11, "tier", "front")                        // out of order: sorted by the decoder
      .entry(11, "app", "web")
      .entry(12, "a.io/x", "1")
      .msg(13, Msg()
                   .str(1, "ReplicaSet")
                   .str(3, "web-rs")
                   .str(4, "u-rs")
                   .str(5, "apps/v1")
                   .boolean(6, true)
                   .boolean(7, true))
      .str(14, "f.io/one")
      .str(14, "f.io/two")
      .msg(17, Msg().str(1, "kubelet"))  // managedFields: never kept
      .unknown();
}

inline Msg pod_proto(std::string_view name, std::string_view rv) {
  Msg spec = Msg()
                 .msg(1, Msg().str(1, "volume"))  // volumes: skipped
                 .msg(2, Msg()
                             .str(1, "app")
                             .str(2, "nginx:1")
                             .str(3, "command")
                             .msg(6, Msg().str(1, "http").int32(2, 80).int32(3, 8080).str(4, "TCP"))
                             .msg(6, Msg().int32(3, 9090))  // protocol unset: "TCP"
                             .msg(7, Msg().str(1, "ENV").str(2, "value")))
                 .msg(2, Msg().str(1, "sidecar").str(2, "envoy:2"))
                 .str(3, "Always")
                 .str(8, "sa")
                 .str(10, "node-1")
                 .boolean(11, true)
                 .msg(20, Msg().str(1, "init"))  // initContainers: not kept
                 .unknown();
  Msg status = Msg()
                   .str(1, "Running")
                   .msg(2, Msg().str(1, "PodScheduled").str(2, "True").str(5, "reason"))
                   .msg(2, Msg().str(1, "Ready").str(2, "True").msg(4, Msg().int64(1, 5)))
                   .str(5, "192.168.0.1")
                   .str(6, "10.0.0.1")
                   .msg(12, Msg().str(1, "10.0.0.1"))
                   .msg(12, Msg().str(1, "fd00::1"))
                   .str(9, "BestEffort")
                   .unknown();
  return Msg().msg(1, pod_meta_proto(name, rv)).msg(2, spec).msg(3, status).unknown();
}

inline void expect_same(const client::Pod& a, const client::Pod& b) {
  EXPECT_EQ(a.metadata, b.metadata);
  EXPECT_EQ(a.node_name, b.node_name);
  EXPECT_EQ(a.service_account_name, b.service_account_name);
  EXPECT_EQ(a.host_network, b.host_network);
  EXPECT_EQ(a.containers, b.containers);
  EXPECT_EQ(a.phase, b.phase);
  EXPECT_EQ(a.pod_ip, b.pod_ip);
  EXPECT_EQ(a.pod_ips, b.pod_ips);
  EXPECT_EQ(a.host_ip, b.host_ip);
  EXPECT_EQ(a.conditions, b.conditions);
}

inline void expect_same(const client::Secret& a, const client::Secret& b) {
  EXPECT_EQ(a.metadata, b.metadata);
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.data, b.data);
}

inline void expect_same(const client::Endpoints& a, const client::Endpoints& b) {
  EXPECT_EQ(a.metadata, b.metadata);
  EXPECT_EQ(a.subsets, b.subsets);
}

inline void expect_same(const client::EndpointSlice& a, const client::EndpointSlice& b) {
  EXPECT_EQ(a.metadata, b.metadata);
  EXPECT_EQ(a.address_type, b.address_type);
  EXPECT_EQ(a.endpoints, b.endpoints);
  EXPECT_EQ(a.ports, b.ports);
}

}  // namespace kinformer::testing
