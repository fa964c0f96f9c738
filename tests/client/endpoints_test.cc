// core/v1 Endpoints model: decode of a full server object, tolerance, wrong shapes, round trip.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "kinformer/client/endpoints.h"

namespace kinformer::client {
namespace {

Result<std::shared_ptr<Object>> decode_endpoints(const std::string& json) {
  rapidjson::Document doc;
  doc.Parse(json.c_str());
  EXPECT_FALSE(doc.HasParseError()) << json;
  return ResourceTraits<Endpoints>::type().codec->decode(doc);
}

// As served by kube-apiserver 1.30 for a Service with one ready and one unready Pod.
constexpr const char* kServerEndpoints = R"({
  "kind": "Endpoints",
  "apiVersion": "v1",
  "metadata": {
    "name": "reviews",
    "namespace": "bookinfo",
    "uid": "1f0e2b71-7c0e-4d7d-9b0c-5a3e8d2a6c55",
    "resourceVersion": "184401",
    "creationTimestamp": "2024-05-02T09:14:07Z",
    "labels": {"app": "reviews", "service": "reviews"},
    "annotations": {"endpoints.kubernetes.io/last-change-trigger-time": "2024-05-02T09:14:19Z"},
    "managedFields": [
      {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
       "time": "2024-05-02T09:14:19Z", "fieldsType": "FieldsV1",
       "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}, "f:subsets": {}}}
    ]
  },
  "subsets": [
    {
      "addresses": [
        {"ip": "10.244.2.17", "nodeName": "kind-worker2",
         "targetRef": {"kind": "Pod", "namespace": "bookinfo", "name": "reviews-v1-5b5d6494f4-2xk8m",
                       "uid": "0c6cfd93-0f3a-4a21-9f6b-3f4b7f0b9d11", "resourceVersion": "184392"}}
      ],
      "notReadyAddresses": [
        {"ip": "10.244.1.9", "hostname": "reviews-1", "nodeName": "kind-worker",
         "targetRef": {"kind": "Pod", "namespace": "bookinfo", "name": "reviews-v2-7d79d5bd5d-qx2hz", "uid": "4b1e"}}
      ],
      "ports": [
        {"name": "http", "port": 9080, "protocol": "TCP", "appProtocol": "http"},
        {"name": "grpc", "port": 9090, "protocol": "TCP"}
      ]
    }
  ]
})";

TEST(Endpoints, DecodesFullServerObject) {
  auto r = decode_endpoints(kServerEndpoints);
  ASSERT_TRUE(r) << r.error().to_string();
  const auto& e = dynamic_cast<const Endpoints&>(*r.value());
  EXPECT_EQ(e.key(), "bookinfo/reviews");
  ASSERT_EQ(e.subsets.size(), 1u);
  const auto& s = e.subsets[0];
  ASSERT_EQ(s.addresses.size(), 1u);
  EXPECT_EQ(s.addresses[0].ip, "10.244.2.17");
  EXPECT_EQ(s.addresses[0].node_name, "kind-worker2");
  EXPECT_EQ(s.addresses[0].hostname, "");
  ASSERT_TRUE(s.addresses[0].target_ref);
  EXPECT_EQ(*s.addresses[0].target_ref,
            (ObjectReference{"Pod", "bookinfo", "reviews-v1-5b5d6494f4-2xk8m",
                             "0c6cfd93-0f3a-4a21-9f6b-3f4b7f0b9d11"}));
  ASSERT_EQ(s.not_ready_addresses.size(), 1u);
  EXPECT_EQ(s.not_ready_addresses[0].hostname, "reviews-1");
  ASSERT_EQ(s.ports.size(), 2u);
  EXPECT_EQ(s.ports[0], (EndpointPort{"http", 9080, "TCP", "http"}));
  EXPECT_EQ(s.ports[1].app_protocol, "");
}

TEST(Endpoints, EmptyAndMissingFields) {
  // A Service without ready or unready Pods: no subsets at all. A real state, not an error.
  auto none = decode_endpoints(R"({"metadata":{"name":"svc","namespace":"ns"}})");
  ASSERT_TRUE(none) << none.error().to_string();
  EXPECT_TRUE(dynamic_cast<const Endpoints&>(*none.value()).subsets.empty());

  auto r = decode_endpoints(
      R"({"metadata":{"name":"svc","namespace":"ns"},"subsets":[{"addresses":[{"ip":"10.0.0.1"}],"ports":[{"port":53}]}]})");
  ASSERT_TRUE(r) << r.error().to_string();
  const auto& e = dynamic_cast<const Endpoints&>(*r.value());
  EXPECT_FALSE(e.subsets[0].addresses[0].target_ref);
  EXPECT_TRUE(e.subsets[0].not_ready_addresses.empty());
  EXPECT_EQ(e.subsets[0].ports[0], (EndpointPort{"", 53, "TCP", ""}));
}

TEST(Endpoints, WrongShapesNameTheField) {
  struct Case {
    const char* json;
    const char* field;
  };
  const Case cases[] = {
      {R"({"metadata":{"name":"svc","namespace":"ns"},"subsets":{}})",
       "subsets: expected an array, got an object"},
      {R"({"metadata":{"name":"svc","namespace":"ns"},"subsets":[[]]})",
       "subsets[0]: expected an object"},
      {R"({"metadata":{"name":"svc","namespace":"ns"},"subsets":[{"addresses":[{"ip":10}]}]})",
       "subsets[0].addresses[0].ip: expected a string, got an integer"},
      {R"({"metadata":{"name":"svc","namespace":"ns"},"subsets":[{},{"notReadyAddresses":[{"ip":"1.2.3.4","targetRef":"Pod/x"}]}]})",
       "subsets[1].notReadyAddresses[0].targetRef: expected an object, got a string"},
      {R"({"metadata":{"name":"svc","namespace":"ns"},"subsets":[{"ports":[{"port":1.5}]}]})",
       "subsets[0].ports[0].port: expected a 32-bit integer, got a number"},
  };
  for (const auto& c : cases) {
    auto r = decode_endpoints(c.json);
    ASSERT_FALSE(r) << c.json;
    EXPECT_EQ(r.error().code, Errc::decode);
    EXPECT_NE(r.error().message.find("Endpoints ns/svc: "), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find(c.field), std::string::npos) << r.error().message;
  }
}

TEST(Endpoints, EncodeDecodeRoundTrip) {
  auto r = decode_endpoints(kServerEndpoints);
  ASSERT_TRUE(r);
  const auto& e = dynamic_cast<const Endpoints&>(*r.value());
  std::string encoded = ResourceTraits<Endpoints>::type().codec->encode(e);
  EXPECT_EQ(encoded.find("managedFields"), std::string::npos);
  auto again = decode_endpoints(encoded);
  ASSERT_TRUE(again) << again.error().to_string();
  const auto& e2 = dynamic_cast<const Endpoints&>(*again.value());
  EXPECT_EQ(e2.subsets, e.subsets);
  EXPECT_EQ(e2.metadata.labels, e.metadata.labels);
  EXPECT_EQ(e2.metadata.annotations, e.metadata.annotations);

  Endpoints empty;
  empty.metadata.name = "svc";
  std::string text = ResourceTraits<Endpoints>::type().codec->encode(empty);
  EXPECT_NE(text.find(R"("subsets":[])"), std::string::npos) << text;
}

}  // namespace
}  // namespace kinformer::client
