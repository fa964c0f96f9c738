// Protobuf decoding of the typed models (client/src/protobuf/): the same models as the JSON
// decoders give for the same objects; unknown fields skipped; the envelope checked; a known
// field of the wrong wire type, or bytes that are not protobuf, named in the error, never a value.
#include "kinformer/client/protobuf.h"

#include <gtest/gtest.h>

#include "kinformer/client/api_error.h"
#include "kinformer/client/dynamic_object.h"
#include "protobuf_samples.h"

namespace kinformer::client {
namespace {

using testing::decode_json;
using testing::envelope;
using testing::expect_same;
using testing::Msg;

template <typename T>
const ProtobufCodec& codec() {
  static const ProtobufCodecPtr c = protobuf_codec(ResourceTraits<T>::type());
  return *c;
}

template <typename T>
Result<std::shared_ptr<Object>> decode_proto(const Msg& m) {
  return codec<T>().decode(m.data());
}

template <typename T>
std::shared_ptr<const T> decoded(const Msg& m) {
  auto r = decode_proto<T>(m);
  EXPECT_TRUE(r) << r.error().to_string();
  return r ? std::dynamic_pointer_cast<const T>(r.value()) : nullptr;
}

std::string decode_error(const Result<std::shared_ptr<Object>>& r) {
  EXPECT_FALSE(r);
  if (r) return {};
  EXPECT_EQ(r.error().code, Errc::decode);
  return r.error().message;
}

TEST(ProtobufCodec, OnlyTypedModelsHaveOne) {
  EXPECT_NE(protobuf_codec(ResourceTraits<Pod>::type()), nullptr);
  EXPECT_NE(protobuf_codec(ResourceTraits<Secret>::type()), nullptr);
  EXPECT_NE(protobuf_codec(ResourceTraits<Endpoints>::type()), nullptr);
  EXPECT_NE(protobuf_codec(ResourceTraits<EndpointSlice>::type()), nullptr);
  EXPECT_EQ(protobuf_codec(ResourceTraits<EndpointSlice>::type())->gvr().group, "discovery.k8s.io");
  // A dynamic "pods" type stays JSON: the codec decides, not the resource name.
  ResourceType dynamic_pods{ResourceTraits<Pod>::type().gvr, dynamic_codec()};
  EXPECT_EQ(protobuf_codec(dynamic_pods), nullptr);
}

TEST(ProtobufPod, SameAsJson) {
  auto json = decode_json<Pod>(testing::pod_json("web-1", "42"));
  auto proto = decoded<Pod>(testing::pod_proto("web-1", "42"));
  ASSERT_TRUE(json && proto);
  expect_same(*proto, *json);
  // Spot checks that the comparison compared something.
  EXPECT_EQ(proto->metadata.creation_timestamp.to_string(), "2024-02-29T23:59:58Z");
  EXPECT_EQ(proto->metadata.labels, (StringMap{{"app", "web"}, {"tier", "front"}}));
  ASSERT_EQ(proto->containers.size(), 2u);
  EXPECT_EQ(proto->containers[0].ports[1].protocol, "TCP");
  EXPECT_EQ(proto->containers[0].ports[1].container_port, 9090);
  EXPECT_TRUE(proto->ready());
  EXPECT_FALSE(proto->metadata.deletion_timestamp);
}

TEST(ProtobufPod, EmptyMessageIsAnEmptyPod) {
  auto proto = decoded<Pod>(Msg());
  auto json = decode_json<Pod>(R"({"apiVersion":"v1","kind":"Pod"})");
  ASSERT_TRUE(proto && json);
  expect_same(*proto, *json);
}

TEST(ProtobufMeta, Timestamps) {
  auto meta = [](const Msg& m) { return decoded<Pod>(Msg().msg(1, m)); };
  // The zero time is an empty message (metav1.Time's Marshal writes nothing), as JSON's null.
  auto zero = meta(Msg().str(1, "p").msg(8, Msg()).msg(9, Msg()));
  ASSERT_TRUE(zero);
  EXPECT_EQ(zero->metadata.creation_timestamp.to_string(), "");
  EXPECT_FALSE(zero->metadata.deletion_timestamp);
  auto deleting = meta(Msg().str(1, "p").msg(9, Msg().int64(1, 1709251205)));
  ASSERT_TRUE(deleting);
  ASSERT_TRUE(deleting->metadata.deletion_timestamp);
  EXPECT_EQ(deleting->metadata.deletion_timestamp->to_string(), "2024-03-01T00:00:05Z");
  auto epoch = meta(Msg().msg(8, Msg().int64(1, 0)));
  ASSERT_TRUE(epoch);
  EXPECT_EQ(epoch->metadata.creation_timestamp.to_string(), "1970-01-01T00:00:00Z");
  auto first = meta(Msg().msg(8, Msg().int64(1, -62135596800)));
  ASSERT_TRUE(first);
  EXPECT_EQ(first->metadata.creation_timestamp.to_string(), "0001-01-01T00:00:00Z");
  auto last = meta(Msg().msg(8, Msg().int64(1, 253402300799)));
  ASSERT_TRUE(last);
  EXPECT_EQ(last->metadata.creation_timestamp.to_string(), "9999-12-31T23:59:59Z");
  std::string e = decode_error(decode_proto<Pod>(
      Msg().msg(1, Msg().str(1, "p").str(3, "ns").msg(8, Msg().int64(1, 253402300800)))));
  EXPECT_NE(e.find("Pod ns/p: metadata.creationTimestamp: a time outside the years 0-9999"),
            std::string::npos)
      << e;
}

TEST(ProtobufMeta, DuplicateMapKeysLastWins) {
  auto pod = decoded<Pod>(Msg().msg(
      1, Msg().entry(11, "b", "1").entry(11, "a", "x").entry(11, "b", "2").entry(11, "a", "y")));
  ASSERT_TRUE(pod);
  EXPECT_EQ(pod->metadata.labels, (StringMap{{"a", "y"}, {"b", "2"}}));
}

TEST(ProtobufMeta, MetadataAfterTheBodyStillNamesTheObject) {
  // Go writes metadata first, but field order is free: errors name the object either way.
  Msg m = Msg().msg(2, Msg().str(11, "not-a-bool")).msg(1, Msg().str(1, "p").str(3, "ns"));
  std::string e = decode_error(decode_proto<Pod>(m));
  EXPECT_EQ(
      e, "Pod ns/p: spec.hostNetwork: expected a boolean (varint), got wire type length-delimited");
}

TEST(ProtobufSecret, SameAsJsonWithRawBytes) {
  auto json = decode_json<Secret>(
      R"({"apiVersion":"v1","kind":"Secret","metadata":{"name":"tls","namespace":"ns"},
    "type":"kubernetes.io/tls","data":{"tls.key":"a2V5AGJ5dGVz/w==","ca.crt":"Y2E=","empty":""},"stringData":{"x":"y"}})");
  // data is map<string, bytes>: the bytes themselves (here with a NUL and 0xff), no base64.
  Msg m = Msg()
              .msg(1, Msg().str(1, "tls").str(3, "ns"))
              .entry(2, "tls.key", std::string("key\0bytes\xff", 10))
              .entry(2, "ca.crt", "ca")
              .msg(2, Msg().str(1, "empty"))  // a value left out is empty
              .str(3, "kubernetes.io/tls")
              .entry(4, "x", "y")  // stringData: write-only, not kept (as in JSON)
              .boolean(5, true)
              .unknown();
  auto proto = decoded<Secret>(m);
  ASSERT_TRUE(json && proto);
  expect_same(*proto, *json);
  EXPECT_EQ(*proto->data.find("tls.key"), std::string("key\0bytes\xff", 10));
}

TEST(ProtobufSecret, WrongWireTypeNamesTheFieldNeverTheValue) {
  Msg m = Msg()
              .msg(1, Msg().str(1, "s").str(3, "ns"))
              .msg(2, Msg().str(1, "password").fixed64(2, 0x544f505345435245));
  std::string e = decode_error(decode_proto<Secret>(m));
  EXPECT_EQ(e,
            "Secret ns/s: data.value: expected a string (length-delimited), got wire type fixed64");
  // Malformed bytes inside a value's entry: the message names where, not what.
  Msg bad = Msg()
                .msg(1, Msg().str(1, "s").str(3, "ns"))
                .msg(2, Msg().str(1, "k").raw("\x12\x7fTOPSECRET"));
  e = decode_error(decode_proto<Secret>(bad));
  EXPECT_EQ(e, "Secret ns/s: data.value: malformed protobuf (end of buffer exception)");
  EXPECT_EQ(e.find("TOPSECRET"), std::string::npos) << e;
}

TEST(ProtobufEndpoints, SameAsJson) {
  auto json = decode_json<Endpoints>(
      R"({"apiVersion":"v1","kind":"Endpoints","metadata":{"name":"web","namespace":"ns"},
    "subsets":[{"addresses":[{"ip":"10.0.0.1","hostname":"h1","nodeName":"n1","targetRef":{"kind":"Pod","namespace":"ns","name":"web-1","uid":"u1"}},
                             {"ip":"10.0.0.2"}],
                "notReadyAddresses":[{"ip":"10.0.0.3"}],
                "ports":[{"name":"http","port":80,"protocol":"TCP","appProtocol":"http"},{"port":53,"protocol":"UDP"},{"port":81}]},
               {}]})");
  Msg subset = Msg()
                   .msg(1, Msg()
                               .str(1, "10.0.0.1")
                               .msg(2, Msg()
                                           .str(1, "Pod")
                                           .str(2, "ns")
                                           .str(3, "web-1")
                                           .str(4, "u1")
                                           .str(5, "v1")
                                           .str(6, "7"))
                               .str(3, "h1")
                               .str(4, "n1")
                               .unknown())
                   .msg(1, Msg().str(1, "10.0.0.2"))
                   .msg(2, Msg().str(1, "10.0.0.3"))
                   .msg(3, Msg().str(1, "http").int32(2, 80).str(3, "TCP").str(4, "http"))
                   .msg(3, Msg().int32(2, 53).str(3, "UDP"))
                   .msg(3, Msg().int32(2, 81))
                   .unknown();
  auto proto = decoded<Endpoints>(
      Msg().msg(1, Msg().str(1, "web").str(3, "ns")).msg(2, subset).msg(2, Msg()));
  ASSERT_TRUE(json && proto);
  expect_same(*proto, *json);
  ASSERT_EQ(proto->subsets.size(), 2u);
  EXPECT_TRUE(proto->subsets[1].addresses.empty());
}

TEST(ProtobufEndpoints, NoSubsetsIsAState) {
  auto proto = decoded<Endpoints>(Msg().msg(1, Msg().str(1, "web").str(3, "ns")));
  auto json =
      decode_json<Endpoints>(R"({"metadata":{"name":"web","namespace":"ns"},"subsets":[]})");
  ASSERT_TRUE(proto && json);
  expect_same(*proto, *json);
  EXPECT_TRUE(proto->subsets.empty());
}

TEST(ProtobufEndpointSlice, SameAsJson) {
  auto json =
      decode_json<EndpointSlice>(R"({"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice",
    "metadata":{"name":"web-abc","namespace":"ns","labels":{"kubernetes.io/service-name":"web"}},
    "addressType":"IPv4",
    "endpoints":[{"addresses":["10.0.0.1","10.0.0.9"],"conditions":{"ready":true,"serving":true,"terminating":false},
                  "hostname":"h","nodeName":"n1","zone":"z1","targetRef":{"kind":"Pod","namespace":"ns","name":"web-1","uid":"u1"}},
                 {"addresses":["10.0.0.2"],"conditions":{}}],
    "ports":[{"name":"http","port":8080,"protocol":"TCP","appProtocol":"http"},{"name":"all"},{"port":0,"protocol":"UDP"}]})");
  Msg m =
      Msg()
          .msg(1,
               Msg().str(1, "web-abc").str(3, "ns").entry(11, "kubernetes.io/service-name", "web"))
          .str(4, "IPv4")
          .msg(2, Msg()
                      .str(1, "10.0.0.1")
                      .str(1, "10.0.0.9")
                      .msg(2, Msg().boolean(1, true).boolean(2, true).boolean(3, false))
                      .str(3, "h")
                      .msg(4, Msg().str(1, "Pod").str(2, "ns").str(3, "web-1").str(4, "u1"))
                      .entry(5, "kubernetes.io/hostname", "n1")  // deprecatedTopology: skipped
                      .str(6, "n1")
                      .str(7, "z1")
                      .msg(8, Msg().msg(1, Msg().str(1, "z1")))  // hints: skipped
                      .unknown())
          .msg(2, Msg().str(1, "10.0.0.2").msg(2, Msg()))  // conditions present, all unknown
          .msg(3, Msg().str(1, "http").str(2, "TCP").int32(3, 8080).str(4, "http"))
          .msg(3, Msg().str(1, "all"))  // port unset: all ports
          .msg(3, Msg().str(2, "UDP").int32(3, 0))
          .unknown();
  auto proto = decoded<EndpointSlice>(m);
  ASSERT_TRUE(json && proto);
  expect_same(*proto, *json);
  EXPECT_EQ(proto->service_name(), "web");
  ASSERT_EQ(proto->endpoints.size(), 2u);
  EXPECT_EQ(proto->endpoints[0].terminating, false);
  EXPECT_FALSE(proto->endpoints[1].ready);
  EXPECT_FALSE(proto->ports[1].port);
  EXPECT_EQ(proto->ports[2].port, 0);
}

TEST(ProtobufModels, WrongWireTypeOfAKnownFieldNamesTheField) {
  Msg meta = Msg().str(1, "p").str(3, "ns");
  // A string where an int32 belongs, deep inside a repeated message.
  Msg pod = Msg().msg(1, meta).msg(
      2, Msg()
             .msg(2, Msg().str(1, "a"))
             .msg(2, Msg().msg(6, Msg().int32(3, 1)).msg(6, Msg().str(3, "80"))));
  EXPECT_EQ(decode_error(decode_proto<Pod>(pod)),
            "Pod ns/p: spec.containers[1].ports[1].containerPort: expected a 32-bit integer "
            "(varint), got wire type length-delimited");
  // A varint where a message belongs.
  EXPECT_EQ(decode_error(decode_proto<Pod>(Msg().msg(1, meta).varint(3, 1))),
            "Pod ns/p: status: expected a message (length-delimited), got wire type varint");
  // A varint where a string belongs, in metadata.
  EXPECT_EQ(
      decode_error(decode_proto<Pod>(Msg().msg(1, Msg().str(1, "p").varint(3, 5)))),
      "Pod p: metadata.namespace: expected a string (length-delimited), got wire type varint");
  // An int32 outside its range (a 64-bit varint).
  EXPECT_EQ(
      decode_error(decode_proto<Endpoints>(
          Msg().msg(1, meta).msg(2, Msg().msg(3, Msg().varint(2, 1ull << 40))))),
      "Endpoints ns/p: subsets[0].ports[0].port: expected a 32-bit integer, got a larger varint");
  EXPECT_EQ(decode_error(decode_proto<EndpointSlice>(
                Msg().msg(1, meta).msg(2, Msg().msg(2, Msg().fixed32(1, 1))))),
            "EndpointSlice ns/p: endpoints[0].conditions.ready: expected a boolean (varint), got "
            "wire type fixed32");
  EXPECT_EQ(
      decode_error(decode_proto<EndpointSlice>(Msg().msg(1, meta).msg(2, Msg().varint(1, 1)))),
      "EndpointSlice ns/p: endpoints[0].addresses: expected a string (length-delimited), got wire "
      "type varint");
  EXPECT_EQ(decode_error(decode_proto<Secret>(Msg().msg(1, meta).varint(3, 1))),
            "Secret ns/p: type: expected a string (length-delimited), got wire type varint");
}

TEST(ProtobufModels, BytesThatAreNotProtobufAreAnError) {
  // A length beyond the end of the message.
  std::string e = decode_error(codec<Pod>().decode(std::string("\x0a\x05\x0a\x01p", 5)));
  EXPECT_EQ(e, "Pod: metadata: malformed protobuf (end of buffer exception)");
  // Wire types 3/4 (groups, unused by Kubernetes), 6 and 7 do not exist.
  e = decode_error(codec<Pod>().decode(std::string("\x0b", 1)));
  EXPECT_NE(e.find("malformed protobuf"), std::string::npos) << e;
  e = decode_error(codec<Pod>().decode(std::string("\x0f", 1)));
  EXPECT_NE(e.find("malformed protobuf"), std::string::npos) << e;
  // Tag 0.
  e = decode_error(codec<Pod>().decode(std::string("\x00\x01", 2)));
  EXPECT_NE(e.find("malformed protobuf"), std::string::npos) << e;
  // A varint longer than 10 bytes.
  e = decode_error(
      codec<Pod>().decode(Msg().msg(1, Msg().raw("\x38" + std::string(11, '\xff'))).data()));
  EXPECT_EQ(e, "Pod: metadata.generation: malformed protobuf (varint too long exception)");
  // Truncated inside a nested message, after metadata.
  e = decode_error(codec<Pod>().decode(
      Msg().msg(1, Msg().str(1, "p").str(3, "ns")).msg(2, Msg().raw("\x52\x03n")).data()));
  EXPECT_EQ(e, "Pod ns/p: spec.nodeName: malformed protobuf (end of buffer exception)");
}

TEST(ProtobufObject, Envelope) {
  Msg pod = testing::pod_proto("web-1", "42");
  auto ok = decode_protobuf_object(codec<Pod>(), envelope("v1", "Pod", pod));
  ASSERT_TRUE(ok) << ok.error().to_string();
  EXPECT_EQ(ok.value()->key(), "ns/web-1");
  // Kind may be left out (Go fills in the expected one), but not be another.
  EXPECT_TRUE(decode_protobuf_object(codec<Pod>(), envelope("", "", pod)));
  auto expect_error = [](const Result<ObjectPtr>& r, std::string_view text) {
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, Errc::decode);
    EXPECT_NE(r.error().message.find(text), std::string::npos) << r.error().message;
  };
  expect_error(decode_protobuf_object(codec<Pod>(), envelope("v1", "Secret", pod)),
               "pods response: expected kind Pod, got \"Secret\"");
  expect_error(decode_protobuf_object(codec<Pod>(), ""), "pods response: empty protobuf body");
  expect_error(decode_protobuf_object(codec<Pod>(), std::string("k8s\0", 4)),
               "empty protobuf message after the k8s\\0 prefix");
  std::string wrong_magic = envelope("v1", "Pod", pod);
  wrong_magic[3] = '\x01';
  expect_error(decode_protobuf_object(codec<Pod>(), wrong_magic),
               "not a Kubernetes protobuf message (no k8s\\0 prefix)");
  expect_error(decode_protobuf_object(codec<Pod>(), R"({"kind":"Pod"})"), "no k8s\\0 prefix");
  std::string encoded = std::string("k8s\0", 4) +
                        Msg().msg(1, Msg().str(2, "Pod")).str(2, pod.data()).str(3, "gzip").data();
  expect_error(decode_protobuf_object(codec<Pod>(), encoded),
               "unsupported contentEncoding \"gzip\"");
  std::string bad_type_meta =
      std::string("k8s\0", 4) + Msg().msg(1, Msg().varint(2, 1)).str(2, pod.data()).data();
  expect_error(decode_protobuf_object(codec<Pod>(), bad_type_meta),
               "typeMeta.kind: expected a string");
  // Unknown envelope fields and a contentType are fine.
  std::string extra =
      std::string("k8s\0", 4) + Msg()
                                    .msg(1, Msg().str(1, "v1").str(2, "Pod").unknown())
                                    .str(2, pod.data())
                                    .str(4, "application/vnd.kubernetes.protobuf")
                                    .unknown()
                                    .data();
  EXPECT_TRUE(decode_protobuf_object(codec<Pod>(), extra));
}

TEST(ProtobufList, ListMetaAndItemsSameAsJson) {
  Msg list =
      Msg()
          .msg(1, Msg().str(1, "/self").str(2, "1234").str(3, "next-page").int64(4, 10).unknown())
          .msg(2, testing::pod_proto("a", "1"))
          .msg(2, testing::pod_proto("b", "2"))
          .unknown();
  auto r = decode_protobuf_list(codec<Pod>(), envelope("v1", "PodList", list));
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(r->resource_version, "1234");
  EXPECT_EQ(r->continue_token, "next-page");
  ASSERT_EQ(r->items.size(), 2u);
  expect_same(dynamic_cast<const Pod&>(*r->items[1]),
              *decode_json<Pod>(testing::pod_json("b", "2")));

  auto empty = decode_protobuf_list(
      codec<EndpointSlice>(),
      envelope("discovery.k8s.io/v1", "EndpointSliceList", Msg().msg(1, Msg().str(2, "7"))));
  ASSERT_TRUE(empty) << empty.error().to_string();
  EXPECT_TRUE(empty->items.empty());
  EXPECT_EQ(empty->resource_version, "7");
  EXPECT_EQ(empty->continue_token, "");
}

TEST(ProtobufList, ErrorsNameTheItemOrTheField) {
  Msg bad_item =
      Msg()
          .msg(2, testing::pod_proto("a", "1"))
          .msg(2, Msg().msg(1, Msg().str(1, "b").str(3, "ns")).msg(2, Msg().varint(10, 1)));
  auto r = decode_protobuf_list(codec<Pod>(), envelope("v1", "PodList", bad_item));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::decode);
  EXPECT_EQ(r.error().message,
            "pods list item 1: Pod ns/b: spec.nodeName: expected a string (length-delimited), got "
            "wire type varint");
  r = decode_protobuf_list(codec<Pod>(),
                           envelope("v1", "PodList", Msg().msg(1, Msg().varint(2, 5))));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            "pods list response: PodList: metadata.resourceVersion: expected a string "
            "(length-delimited), got wire type varint");
  r = decode_protobuf_list(codec<Pod>(), envelope("v1", "Pod", Msg()));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "pods list response: expected kind PodList, got \"Pod\"");
}

Msg expired_status() {
  return Msg()
      .msg(1, Msg())
      .str(2, "Failure")
      .str(3, "too old resource version: 1 (5)")
      .str(4, "Expired")
      .int32(6, 410);
}

TEST(ProtobufStatus, DecodesLikeJson) {
  Error e;
  ASSERT_TRUE(decode_protobuf_status(expired_status().data(), e).ok());
  EXPECT_EQ(e.code, Errc::api);
  EXPECT_EQ(e.http_status, 410);
  EXPECT_TRUE(e.is_expired());
  EXPECT_EQ(e.message, "too old resource version: 1 (5)");

  Msg too_large =
      Msg()
          .str(3, "Too large resource version: 100, current: 50")
          .str(4, "Timeout")
          .msg(5, Msg()
                      .str(1, "x")
                      .msg(4, Msg().str(1, "ResourceVersionTooLarge").str(2, "m").str(3, "f"))
                      .int32(5, 1)
                      .unknown())
          .int32(6, 504);
  ASSERT_TRUE(decode_protobuf_status(too_large.data(), e).ok());
  EXPECT_EQ(e.http_status, 504);
  EXPECT_TRUE(e.is_resource_version_too_large());
  EXPECT_EQ(e.retry_after, std::chrono::seconds(1));
  EXPECT_EQ(e.causes, std::vector<std::string>{"ResourceVersionTooLarge"});

  // No code: 500; a retryAfterSeconds beyond the cap is capped; causes are bounded.
  ASSERT_TRUE(decode_protobuf_status(Msg().msg(5, Msg().int32(5, 1 << 30)).data(), e).ok());
  EXPECT_EQ(e.http_status, 500);
  EXPECT_EQ(e.retry_after, kMaxRetryAfter);
  Msg details;
  for (int i = 0; i < 40; ++i) details.msg(4, Msg().str(1, "c" + std::to_string(i)));
  ASSERT_TRUE(decode_protobuf_status(Msg().msg(5, details).data(), e).ok());
  EXPECT_EQ(e.causes.size(), 16u);
  EXPECT_EQ(e.causes[15], "c15");

  auto bad = decode_protobuf_status(Msg().str(6, "410").data(), e);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message,
            "Status: code: expected a 32-bit integer (varint), got wire type length-delimited");
}

TEST(ProtobufStatus, ErrorResponses) {
  Error e = error_from_protobuf_response(410, envelope("v1", "Status", expired_status()));
  EXPECT_EQ(e.code, Errc::api);
  EXPECT_EQ(e.http_status, 410);
  EXPECT_EQ(e.reason, "Expired");
  EXPECT_EQ(e.message, "too old resource version: 1 (5)");
  // The Retry-After header wins over the Status detail.
  e = error_from_protobuf_response(
      429,
      envelope("v1", "Status",
               Msg().str(4, "TooManyRequests").msg(5, Msg().int32(5, 9)).int32(6, 429)),
      "3");
  EXPECT_EQ(e.retry_after, std::chrono::seconds(3));
  EXPECT_EQ(e.message, "HTTP 429");
  // Protobuf that is not a Status keeps only its size: it may be a Secret.
  std::string secret =
      envelope("v1", "Secret", Msg().msg(1, Msg().str(1, "s")).entry(2, "k", "TOPSECRET"));
  e = error_from_protobuf_response(500, secret);
  EXPECT_EQ(e.message, "HTTP 500 with a protobuf body that is not a Status (" +
                           std::to_string(secret.size()) + " bytes)");
  EXPECT_EQ(e.http_status, 500);
  // A server that answers JSON or text anyway is mapped as error_from_response maps it.
  e = error_from_protobuf_response(429, "Too many requests, please try again later.\n", "2");
  EXPECT_EQ(e.message, "Too many requests, please try again later.");
  EXPECT_EQ(e.reason, "TooManyRequests");
  EXPECT_EQ(e.retry_after, std::chrono::seconds(2));
}

}  // namespace
}  // namespace kinformer::client
