// Typed models: Secret, EndpointSlice (decode tolerant of unknown/missing fields, encode round trip).
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "kinformer/client/endpoint_slice.h"
#include "kinformer/client/secret.h"

namespace kinformer::client {
namespace {

template <typename T>
Result<std::shared_ptr<Object>> decode(const std::string& json) {
  rapidjson::Document doc;
  doc.Parse(json.c_str());
  return ResourceTraits<T>::type().codec->decode(doc);
}

TEST(Secret, DecodesBase64DataAndRoundTrips) {
  auto r = decode<Secret>(R"({"apiVersion":"v1","kind":"Secret","metadata":{"name":"tls","namespace":"ns","managedFields":[{}]},
    "type":"kubernetes.io/tls","data":{"tls.key":"a2V5LWJ5dGVz","ca.crt":"Y2E="},"unknown":{"x":1}})");
  ASSERT_TRUE(r) << r.error().to_string();
  const auto& s = dynamic_cast<const Secret&>(*r.value());
  EXPECT_EQ(s.type, "kubernetes.io/tls");
  ASSERT_EQ(s.data.size(), 2u);
  EXPECT_EQ(*find_value(s.data, "tls.key"), "key-bytes");
  std::string encoded = ResourceTraits<Secret>::type().codec->encode(s);
  auto again = decode<Secret>(encoded);
  ASSERT_TRUE(again);
  EXPECT_EQ(dynamic_cast<const Secret&>(*again.value()).data, s.data);
}

TEST(Secret, BadBase64NamesKeyNotValue) {
  auto r = decode<Secret>(R"({"metadata":{"name":"s","namespace":"ns"},"data":{"password":"TOPSECRET!!"}})");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::decode);
  EXPECT_NE(r.error().message.find("data.password"), std::string::npos);
  EXPECT_EQ(r.error().message.find("TOPSECRET"), std::string::npos);
}

TEST(EndpointSlice, DecodesMeshFields) {
  auto r = decode<EndpointSlice>(R"({"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice",
    "metadata":{"name":"web-abc","namespace":"ns","labels":{"kubernetes.io/service-name":"web"}},
    "addressType":"IPv4",
    "endpoints":[{"addresses":["10.0.0.1"],"conditions":{"ready":true,"serving":true,"terminating":false},
                  "nodeName":"n1","zone":"z1","targetRef":{"kind":"Pod","namespace":"ns","name":"web-1","uid":"u1"}},
                 {"addresses":["10.0.0.2"]}],
    "ports":[{"name":"http","port":8080,"protocol":"TCP","appProtocol":"http"},{"name":"all"}]})");
  ASSERT_TRUE(r) << r.error().to_string();
  const auto& s = dynamic_cast<const EndpointSlice&>(*r.value());
  EXPECT_EQ(s.service_name(), "web");
  EXPECT_EQ(s.address_type, "IPv4");
  ASSERT_EQ(s.endpoints.size(), 2u);
  EXPECT_EQ(s.endpoints[0].ready, true);
  EXPECT_EQ(s.endpoints[0].terminating, false);
  EXPECT_EQ(s.endpoints[0].target_ref->name, "web-1");
  EXPECT_FALSE(s.endpoints[1].ready.has_value());
  ASSERT_EQ(s.ports.size(), 2u);
  EXPECT_EQ(s.ports[0].port, 8080);
  EXPECT_EQ(s.ports[0].app_protocol, "http");
  EXPECT_FALSE(s.ports[1].port);
  EXPECT_EQ(s.ports[1].protocol, "TCP");
  auto again = decode<EndpointSlice>(ResourceTraits<EndpointSlice>::type().codec->encode(s));
  ASSERT_TRUE(again);
  const auto& s2 = dynamic_cast<const EndpointSlice&>(*again.value());
  EXPECT_EQ(s2.endpoints, s.endpoints);
  EXPECT_EQ(s2.ports, s.ports);
  EXPECT_EQ(s2.metadata, s.metadata);
}

TEST(EndpointSlice, EmptySliceIsValid) {
  auto r = decode<EndpointSlice>(R"({"metadata":{"name":"e","namespace":"ns"},"addressType":"IPv4","endpoints":null})");
  ASSERT_TRUE(r);
  EXPECT_TRUE(dynamic_cast<const EndpointSlice&>(*r.value()).endpoints.empty());
}

}  // namespace
}  // namespace kinformer::client
