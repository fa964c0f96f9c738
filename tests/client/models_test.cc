// Typed models: Secret, EndpointSlice (decode tolerant of unknown/missing fields, wrong shapes name
// the field and never a secret value, encode round trip).
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "json_decode.h"
#include "kinformer/client/dynamic_object.h"
#include "kinformer/client/endpoint_slice.h"
#include "kinformer/client/secret.h"

namespace kinformer::client {
namespace {

// {"kind":"Pod","spec":[[...]]} nested `depth` levels in all, built by hand: a value that never
// went through the client's depth-limited parser.
void deep_object(rapidjson::Document& doc, int depth) {
  auto& a = doc.GetAllocator();
  rapidjson::Value inner(rapidjson::kArrayType);
  for (int level = 2; level < depth; ++level) {
    rapidjson::Value outer(rapidjson::kArrayType);
    outer.PushBack(inner, a);
    inner = outer;
  }
  doc.SetObject();
  doc.AddMember("kind", "Pod", a);
  doc.AddMember("spec", inner, a);
}

TEST(DynamicObject, NestingBeyondTheLimitIsADecodeError) {
  rapidjson::Document ok;  // pool allocator: freeing a deep value does not recurse
  deep_object(ok, kMaxJsonDepth);
  auto decoded = dynamic_codec()->decode(ok);
  ASSERT_TRUE(decoded) << decoded.error().to_string();

  rapidjson::Document deep;
  deep_object(deep, kMaxJsonDepth + 1);
  auto r = dynamic_codec()->decode(deep);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::decode);
  EXPECT_NE(r.error().message.find("nested deeper than " + std::to_string(kMaxJsonDepth)),
            std::string::npos)
      << r.error().message;
}

// Found by the model fuzzer: RapidJSON reads 10.5e308 as infinity, which the writer cannot
// write, so the stored JSON was invalid. It is a decode error instead.
TEST(DynamicObject, NumberBeyondTheDoubleRangeIsADecodeError) {
  for (const char* json : {R"({"kind":10.5e308})", R"({"spec":{"a":[1,10.5e308]}})"}) {
    rapidjson::Document doc;
    doc.Parse(json);
    ASSERT_FALSE(doc.HasParseError()) << json;
    auto r = dynamic_codec()->decode(doc);
    ASSERT_FALSE(r.ok()) << json;
    EXPECT_NE(r.error().message.find("outside the range of a double"), std::string::npos)
        << r.error().message;
  }
}

TEST(Secret, DecodesBase64DataAndRoundTrips) {
  auto r = decode<Secret>(
      R"({"apiVersion":"v1","kind":"Secret","metadata":{"name":"tls","namespace":"ns","managedFields":[{}]},
    "type":"kubernetes.io/tls","data":{"tls.key":"a2V5LWJ5dGVz","ca.crt":"Y2E="},"unknown":{"x":1}})");
  ASSERT_TRUE(r) << r.error().to_string();
  const auto& s = dynamic_cast<const Secret&>(*r.value());
  EXPECT_EQ(s.type, "kubernetes.io/tls");
  ASSERT_EQ(s.data.size(), 2u);
  EXPECT_EQ(*s.data.find("tls.key"), "key-bytes");
  std::string encoded = ResourceTraits<Secret>::type().codec->encode(s);
  auto again = decode<Secret>(encoded);
  ASSERT_TRUE(again);
  EXPECT_EQ(dynamic_cast<const Secret&>(*again.value()).data, s.data);
}

TEST(Secret, BadBase64NamesKeyNotValue) {
  auto r = decode<Secret>(
      R"({"metadata":{"name":"s","namespace":"ns"},"data":{"password":"TOPSECRET!!"}})");
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
  auto r = decode<EndpointSlice>(
      R"({"metadata":{"name":"e","namespace":"ns"},"addressType":"IPv4","endpoints":null})");
  ASSERT_TRUE(r);
  EXPECT_TRUE(dynamic_cast<const EndpointSlice&>(*r.value()).endpoints.empty());
}

TEST(EndpointSlice, WrongShapesNameTheField) {
  struct Case {
    const char* json;
    const char* field;
  };
  const Case cases[] = {
      {R"({"metadata":{"name":"e","namespace":"ns"},"addressType":4})",
       "addressType: expected a string, got an integer"},
      {R"({"metadata":{"name":"e","namespace":"ns"},"endpoints":{"addresses":[]}})",
       "endpoints: expected an array, got an object"},
      {R"({"metadata":{"name":"e","namespace":"ns"},"endpoints":["10.0.0.1"]})",
       "endpoints[0]: expected an object, got a string"},
      {R"({"metadata":{"name":"e","namespace":"ns"},"endpoints":[{"addresses":["10.0.0.1"]},{"addresses":["10.0.0.2",7]}]})",
       "endpoints[1].addresses[1]: expected a string, got an integer"},
      {R"({"metadata":{"name":"e","namespace":"ns"},"endpoints":[{"addresses":"10.0.0.1"}]})",
       "endpoints[0].addresses: expected an array, got a string"},
      {R"({"metadata":{"name":"e","namespace":"ns"},"endpoints":[{"conditions":{"ready":"true"}}]})",
       "endpoints[0].conditions.ready: expected a boolean, got a string"},
      {R"({"metadata":{"name":"e","namespace":"ns"},"endpoints":[{"conditions":{"ready":true,"terminating":1}}]})",
       "endpoints[0].conditions.terminating: expected a boolean, got an integer"},
      {R"({"metadata":{"name":"e","namespace":"ns"},"endpoints":[{"conditions":[]}]})",
       "endpoints[0].conditions: expected an object, got an array"},
      {R"({"metadata":{"name":"e","namespace":"ns"},"endpoints":[{"nodeName":["n1"]}]})",
       "endpoints[0].nodeName: expected a string, got an array"},
      {R"({"metadata":{"name":"e","namespace":"ns"},"endpoints":[{"targetRef":"Pod/x"}]})",
       "endpoints[0].targetRef: expected an object, got a string"},
      {R"({"metadata":{"name":"e","namespace":"ns"},"endpoints":[{"targetRef":{"uid":1}}]})",
       "endpoints[0].targetRef.uid: expected a string, got an integer"},
      {R"({"metadata":{"name":"e","namespace":"ns"},"ports":{}})",
       "ports: expected an array, got an object"},
      {R"({"metadata":{"name":"e","namespace":"ns"},"ports":[{"port":80},{"port":"8080"}]})",
       "ports[1].port: expected a 32-bit integer, got a string"},
      {R"({"metadata":{"name":"e","namespace":"ns"},"ports":[{"port":80.5}]})",
       "ports[0].port: expected a 32-bit integer, got a number"},
      {R"({"metadata":{"name":"e","namespace":"ns"},"ports":[{"protocol":6}]})",
       "ports[0].protocol: expected a string, got an integer"},
  };
  for (const auto& c : cases) {
    auto r = decode<EndpointSlice>(c.json);
    ASSERT_FALSE(r) << c.json;
    EXPECT_EQ(r.error().code, Errc::decode);
    EXPECT_NE(r.error().message.find("EndpointSlice ns/e: "), std::string::npos)
        << r.error().message;
    EXPECT_NE(r.error().message.find(c.field), std::string::npos) << r.error().message;
  }
}

TEST(EndpointSlice, NullFieldsAreDefaults) {
  auto r = decode<EndpointSlice>(R"({"metadata":{"name":"e","namespace":"ns"},"addressType":null,
    "endpoints":[{"addresses":null,"conditions":{"ready":null,"serving":false},"targetRef":null,"zone":null}],
    "ports":[{"port":null,"protocol":null}]})");
  ASSERT_TRUE(r) << r.error().to_string();
  const auto& s = dynamic_cast<const EndpointSlice&>(*r.value());
  EXPECT_EQ(s.address_type, "");
  ASSERT_EQ(s.endpoints.size(), 1u);
  EXPECT_TRUE(s.endpoints[0].addresses.empty());
  EXPECT_FALSE(s.endpoints[0].ready.has_value());
  EXPECT_EQ(s.endpoints[0].serving, false);
  EXPECT_FALSE(s.endpoints[0].target_ref);
  ASSERT_EQ(s.ports.size(), 1u);
  EXPECT_FALSE(s.ports[0].port);
  EXPECT_EQ(s.ports[0].protocol, "TCP");
}

TEST(Secret, WrongShapesNameTheField) {
  struct Case {
    const char* json;
    const char* field;
  };
  const Case cases[] = {
      {R"({"metadata":{"name":"s","namespace":"ns"},"type":1})",
       "type: expected a string, got an integer"},
      {R"({"metadata":{"name":"s","namespace":"ns"},"data":["a2V5"]})",
       "data: expected an object, got an array"},
      {R"({"metadata":{"name":"s","namespace":"ns"},"data":"a2V5"})",
       "data: expected an object, got a string"},
      {R"({"metadata":{"name":"s","namespace":"ns"},"data":{"ca.crt":"Y2E=","tls.key":12345}})",
       "data.tls.key: expected a string, got an integer"},
      {R"({"metadata":{"name":"s","namespace":"ns"},"data":{"tls.key":{"v":"a2V5"}}})",
       "data.tls.key: expected a string, got an object"},
      {R"({"metadata":{"name":"s","namespace":"ns"},"data":{"ca.crt":"Y2E=","tls.key":"a2V5!"}})",
       "data.tls.key: not valid base64"},
  };
  for (const auto& c : cases) {
    auto r = decode<Secret>(c.json);
    ASSERT_FALSE(r) << c.json;
    EXPECT_EQ(r.error().code, Errc::decode);
    EXPECT_NE(r.error().message.find("Secret ns/s: "), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find(c.field), std::string::npos) << r.error().message;
  }
}

TEST(Secret, NullDataAndNullValueAreEmpty) {
  auto none =
      decode<Secret>(R"({"metadata":{"name":"s","namespace":"ns"},"type":null,"data":null})");
  ASSERT_TRUE(none) << none.error().to_string();
  EXPECT_TRUE(dynamic_cast<const Secret&>(*none.value()).data.empty());
  auto r = decode<Secret>(
      R"({"metadata":{"name":"s","namespace":"ns"},"data":{"empty":null,"also":""}})");
  ASSERT_TRUE(r) << r.error().to_string();
  const auto& s = dynamic_cast<const Secret&>(*r.value());
  ASSERT_EQ(s.data.size(), 2u);
  EXPECT_EQ(*s.data.find("empty"), "");
  EXPECT_EQ(*s.data.find("also"), "");
}

TEST(Secret, NoErrorMessageCarriesASecretValue) {
  // Each value is a distinctive marker; whatever is wrong with the object, the message names
  // fields and keys only. The markers are checked raw and base64-decoded.
  const char* jsons[] = {
      R"({"metadata":{"name":"s","namespace":"ns"},"data":{"password":"SUNFLOWER-hunter2!!"}})",
      R"({"metadata":{"name":"s","namespace":"ns"},"data":{"password":"SUNFLOWER=hunter2"}})",
      R"({"metadata":{"name":"s","namespace":"ns"},"data":{"ok":"aHVudGVyMg==","password":"U1VORkxPV0VS-"}})",
      R"({"metadata":{"name":"s","namespace":"ns"},"data":{"password":{"SUNFLOWER":"hunter2"}}})",
      R"({"metadata":{"name":"s","namespace":"ns"},"data":{"password":["SUNFLOWER","hunter2"]}})",
      R"({"metadata":{"name":"s","namespace":"ns"},"data":{"ok":"aHVudGVyMg==","password":true}})",
      R"({"metadata":{"name":"s","namespace":"ns"},"data":["SUNFLOWER","hunter2"]})",
      R"({"metadata":{"name":"s","namespace":"ns"},"data":"SUNFLOWER-hunter2"})",
      R"({"metadata":{"name":"s","namespace":"ns"},"type":{"SUNFLOWER":"hunter2"},"data":{"ok":"aHVudGVyMg=="}})",
  };
  for (const char* json : jsons) {
    auto r = decode<Secret>(json);
    ASSERT_FALSE(r) << json;
    EXPECT_EQ(r.error().code, Errc::decode);
    const std::string text = r.error().message + " " + r.error().to_string();
    for (const char* marker : {"SUNFLOWER", "hunter2", "aHVudGVy", "U1VORkxPV0VS"}) {
      EXPECT_EQ(text.find(marker), std::string::npos) << marker << " leaked: " << text;
    }
  }
}

}  // namespace
}  // namespace kinformer::client
