// RestClient's protobuf negotiation (client/src/protobuf/negotiation.h): typed lists and watches
// ask for protobuf first and JSON second and decode by the response's Content-Type; dynamic
// objects, get() and the RestClientOptions::protobuf = false switch stay JSON.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>

#include "fake_apiserver.h"
#include "kinformer/client/dynamic_object.h"
#include "kinformer/client/rest_client.h"
#include "protobuf_samples.h"
#include "test_resources.h"

namespace kinformer::client {
namespace {

using namespace std::chrono_literals;
using kinformer::testing::FakeApiServer;
using kinformer::testing::Reply;
using kinformer::testing::Request;
using kinformer::testing::ScriptedStream;
using testing::envelope;
using testing::Msg;
using testing::watch_frame;

constexpr std::string_view kListAccept = "application/vnd.kubernetes.protobuf, application/json";
constexpr std::string_view kWatchAccept =
    "application/vnd.kubernetes.protobuf;stream=watch, application/json";

RestClientOptions protobuf_options(bool protobuf = true) {
  RestClientOptions o = unlimited();
  o.protobuf = protobuf;
  return o;
}

std::string pod_list_proto() {
  return envelope("v1", "PodList",
                  Msg()
                      .msg(1, Msg().str(2, "100").str(3, "next"))
                      .msg(2, testing::pod_proto("a", "1"))
                      .msg(2, testing::pod_proto("b", "2")));
}

TEST(ProtobufRestClient, TypedListAsksForProtobufAndDecodesIt) {
  FakeApiServer server;
  server.on("GET", "/api/v1/namespaces/ns/pods",
            [](const Request&) { return protobuf_reply(pod_list_proto()); });
  RestClient client(server.cluster_config(), protobuf_options());
  auto r = client.list(pods(), "ns");
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(server.requests().at(0).header("accept"), kListAccept);
  EXPECT_EQ(r->resource_version, "100");
  EXPECT_EQ(r->continue_token, "next");
  ASSERT_EQ(r->items.size(), 2u);
  testing::expect_same(dynamic_cast<const Pod&>(*r->items[0]),
                       *testing::decode_json<Pod>(testing::pod_json("a", "1")));
}

TEST(ProtobufRestClient, TypedListFallsBackToJsonWhenTheServerAnswersJson) {
  FakeApiServer server;
  server.on("GET", "/api/v1/namespaces/ns/pods", [](const Request&) {
    return Reply::json(
        R"({"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":[)" +
        one_line(testing::pod_json("a", "1")) + "]}");
  });
  RestClient client(server.cluster_config(), protobuf_options());
  auto r = client.list(pods(), "ns");
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(server.requests().at(0).header("accept"), kListAccept);
  EXPECT_EQ(r->resource_version, "5");
  ASSERT_EQ(r->items.size(), 1u);
  testing::expect_same(dynamic_cast<const Pod&>(*r->items[0]),
                       *testing::decode_json<Pod>(testing::pod_json("a", "1")));
}

TEST(ProtobufRestClient, ListErrorsInProtobufAreMapped) {
  FakeApiServer server;
  server.on("GET", "/api/v1/namespaces/ns/pods", [](const Request&) {
    return protobuf_reply(
        envelope("v1", "Status",
                 Msg().str(3, "continue token expired").str(4, "Expired").int32(6, 410)),
        410);
  });
  RestClient client(server.cluster_config(), protobuf_options());
  auto r = client.list(pods(), "ns");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::api);
  EXPECT_EQ(r.error().http_status, 410);
  EXPECT_EQ(r.error().reason, "Expired");
  EXPECT_EQ(r.error().message, "continue token expired");
  // A JSON error body is still understood.
  server.on("GET", "/api/v1/namespaces/ns/pods",
            [](const Request&) { return Reply::api_status(403, "Forbidden", "no"); });
  r = client.list(pods(), "ns");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().reason, "Forbidden");
}

TEST(ProtobufRestClient, MalformedProtobufListIsADecodeError) {
  FakeApiServer server;
  server.on("GET", "/api/v1/namespaces/ns/pods",
            [](const Request&) { return protobuf_reply("{\"not\":\"protobuf\"}"); });
  RestClient client(server.cluster_config(), protobuf_options());
  auto r = client.list(pods(), "ns");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::decode);
  EXPECT_EQ(r.error().message,
            "pods list response: not a Kubernetes protobuf message (no k8s\\0 prefix)");
}

TEST(ProtobufRestClient, SwitchOffDynamicObjectsAndGetStayJson) {
  FakeApiServer server;
  server.on("GET", "/api/v1/namespaces/ns/pods", [](const Request&) {
    return Reply::json(R"({"kind":"PodList","metadata":{"resourceVersion":"5"},"items":[]})");
  });
  server.on("GET", "/api/v1/namespaces/ns/pods/a",
            [](const Request&) { return Reply::json(one_line(testing::pod_json("a", "1"))); });
  RestClient off(server.cluster_config(), protobuf_options(false));
  ASSERT_TRUE(off.list(pods(), "ns"));
  RestClient on(server.cluster_config(), protobuf_options());
  ASSERT_TRUE(on.list(dynamic_resource(pods().gvr), "ns"));
  ASSERT_TRUE(on.get(pods(), "ns", "a"));
  auto requests = server.requests();
  ASSERT_EQ(requests.size(), 3u);
  for (const auto& req : requests)
    EXPECT_EQ(req.header("accept"), "application/json") << req.target;
}

TEST(ProtobufRestClient, TypedWatchAsksForProtobufAndDecodesFramesAcrossChunks) {
  FakeApiServer server;
  auto stream = std::make_shared<ScriptedStream>();
  server.on("GET", "/api/v1/namespaces/ns/pods", [&](const Request&) {
    Reply r;
    r.headers.emplace_back("Content-Type", "application/vnd.kubernetes.protobuf;stream=watch");
    r.stream = stream;
    return r;
  });
  RestClient client(server.cluster_config(), protobuf_options());
  auto w = client.watch(pods(), "ns", ListOptions{});
  ASSERT_TRUE(w) << w.error().to_string();
  EXPECT_EQ(server.requests().at(0).header("accept"), kWatchAccept);
  std::string body = watch_frame("ADDED", envelope("v1", "Pod", testing::pod_proto("a", "1"))) +
                     watch_frame("MODIFIED", envelope("v1", "Pod", testing::pod_proto("a", "2")));
  // Chunks that split the first frame's length and the second frame's object.
  stream->send(body.substr(0, 2));
  stream->send(body.substr(2, body.size() - 40));
  stream->send(body.substr(body.size() - 38));
  auto first = w.value()->next();
  ASSERT_TRUE(first && first.value()) << (first ? "end" : first.error().to_string());
  EXPECT_EQ(first.value()->type, EventType::added);
  testing::expect_same(dynamic_cast<const Pod&>(*first.value()->object),
                       *testing::decode_json<Pod>(testing::pod_json("a", "1")));
  auto second = w.value()->next();
  ASSERT_TRUE(second && second.value());
  EXPECT_EQ(second.value()->type, EventType::modified);
  EXPECT_EQ(second.value()->object->metadata.resource_version, "2");
  stream->send(watch_frame(
      "ERROR",
      envelope("v1", "Status",
               Msg().str(3, "too old resource version: 1 (5)").str(4, "Expired").int32(6, 410))));
  auto error = w.value()->next();
  ASSERT_FALSE(error);
  EXPECT_EQ(error.error().http_status, 410);
  EXPECT_TRUE(error.error().is_expired());
}

TEST(ProtobufRestClient, TypedWatchTruncatedInAFrameIsTruncated) {
  FakeApiServer server;
  auto stream = std::make_shared<ScriptedStream>();
  server.on("GET", "/api/v1/namespaces/ns/pods", [&](const Request&) {
    Reply r;
    r.headers.emplace_back("Content-Type", "application/vnd.kubernetes.protobuf;stream=watch");
    r.stream = stream;
    return r;
  });
  RestClient client(server.cluster_config(), protobuf_options());
  auto w = client.watch(pods(), "ns", ListOptions{});
  ASSERT_TRUE(w) << w.error().to_string();
  std::string frame = watch_frame("ADDED", envelope("v1", "Pod", testing::pod_proto("a", "1")));
  stream->send(frame.substr(0, frame.size() - 1));
  stream->end();
  auto r = w.value()->next();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::truncated);
}

TEST(ProtobufRestClient, TypedWatchFallsBackToJson) {
  FakeApiServer server;
  auto stream = std::make_shared<ScriptedStream>();
  server.on("GET", "/api/v1/namespaces/ns/pods",
            [&](const Request&) { return Reply::streaming(stream); });
  RestClient client(server.cluster_config(), protobuf_options());
  auto w = client.watch(pods(), "ns", ListOptions{});
  ASSERT_TRUE(w) << w.error().to_string();
  EXPECT_EQ(server.requests().at(0).header("accept"), kWatchAccept);
  stream->send(
      kinformer::testing::watch_event_line("ADDED", one_line(testing::pod_json("a", "1"))));
  auto e = w.value()->next();
  ASSERT_TRUE(e && e.value()) << (e ? "end" : e.error().to_string());
  testing::expect_same(dynamic_cast<const Pod&>(*e.value()->object),
                       *testing::decode_json<Pod>(testing::pod_json("a", "1")));
}

TEST(ProtobufRestClient, WatchOpenErrorInProtobufIsMapped) {
  FakeApiServer server;
  server.on("GET", "/api/v1/namespaces/ns/pods", [](const Request&) {
    Reply r = protobuf_reply(
        envelope("v1", "Status", Msg().str(3, "slow down").str(4, "TooManyRequests").int32(6, 429)),
        429);
    r.headers.emplace_back("Retry-After", "2");
    return r;
  });
  RestClient client(server.cluster_config(), protobuf_options());
  auto w = client.watch(pods(), "ns", ListOptions{});
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().http_status, 429);
  EXPECT_EQ(w.error().reason, "TooManyRequests");
  EXPECT_EQ(w.error().message, "slow down");
  EXPECT_EQ(w.error().retry_after, std::chrono::seconds(2));
}

TEST(ProtobufRestClient, DynamicAndSwitchedOffWatchesAskForJson) {
  FakeApiServer server;
  server.on("GET", "/api/v1/namespaces/ns/pods",
            [](const Request&) { return Reply::streaming(std::make_shared<ScriptedStream>()); });
  RestClient on(server.cluster_config(), protobuf_options());
  auto dynamic = on.watch(dynamic_resource(pods().gvr), "ns", ListOptions{});
  ASSERT_TRUE(dynamic) << dynamic.error().to_string();
  RestClient off(server.cluster_config(), protobuf_options(false));
  auto typed = off.watch(pods(), "ns", ListOptions{});
  ASSERT_TRUE(typed) << typed.error().to_string();
  auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  for (const auto& req : requests) EXPECT_EQ(req.header("accept"), "application/json");
}

// --- lists streamed as they arrive (JsonListDecoder, ProtobufListDecoder) --------------------

std::string pod_list_json() {
  return R"({"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"100","continue":"next"},"items":[)" +
         one_line(testing::pod_json("a", "1")) + "," + one_line(testing::pod_json("b", "2")) + "]}";
}

// A chunked 200 reply of `content_type` whose body the test sends.
Reply stream_reply(std::shared_ptr<ScriptedStream> stream, bool protobuf) {
  Reply r = Reply::streaming(std::move(stream));
  if (protobuf) r.headers = {{"Content-Type", "application/vnd.kubernetes.protobuf"}};
  return r;
}

TEST(ProtobufRestClient, ListInSmallChunksDecodesInBothEncodings) {
  for (bool protobuf : {true, false}) {
    SCOPED_TRACE(protobuf ? "protobuf" : "json");
    const std::string body = protobuf ? pod_list_proto() : pod_list_json();
    FakeApiServer server;
    server.on("GET", "/api/v1/namespaces/ns/pods", [&](const Request&) {
      auto stream = std::make_shared<ScriptedStream>();
      for (std::size_t at = 0; at < body.size(); at += 7) stream->send(body.substr(at, 7));
      stream->end();
      return stream_reply(stream, protobuf);
    });
    RestClient client(server.cluster_config(), protobuf_options());
    auto r = client.list(pods(), "ns");
    ASSERT_TRUE(r) << r.error().to_string();
    EXPECT_EQ(r->resource_version, "100");
    EXPECT_EQ(r->continue_token, "next");
    ASSERT_EQ(r->items.size(), 2u);
    testing::expect_same(dynamic_cast<const Pod&>(*r->items[1]),
                         *testing::decode_json<Pod>(testing::pod_json("b", "2")));
  }
}

// After a list that failed mid-body (its connection closed), the next list of the two Pods the
// server now answers works, on a new connection.
void expect_next_list_on_a_new_connection(FakeApiServer& server, RestClient& client) {
  auto again = client.list(pods(), "ns");
  ASSERT_TRUE(again) << again.error().to_string();
  EXPECT_EQ(again->items.size(), 2u);
  auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_NE(requests[0].connection, requests[1].connection);
}

TEST(ProtobufRestClient, ListDecodeErrorMidBodyAbortsAndTheNextRequestWorks) {
  for (bool protobuf : {true, false}) {
    SCOPED_TRACE(protobuf ? "protobuf" : "json");
    // The first item, then one that cannot decode; the server never ends the body: the client
    // must stop at the bad item, not wait for the rest.
    const std::string head =
        protobuf ? envelope("v1", "PodList",
                            Msg().msg(2, testing::pod_proto("a", "1")).msg(2, Msg().varint(1, 3)))
                 : R"({"items":[)" + one_line(testing::pod_json("a", "1")) +
                       R"(,{"metadata":"not an object"},)";
    FakeApiServer server;
    auto stream = std::make_shared<ScriptedStream>();
    server.on("GET", "/api/v1/namespaces/ns/pods", [&](const Request&) {
      stream->send(head);  // and never end()
      return stream_reply(stream, protobuf);
    });
    RestClient client(server.cluster_config(), protobuf_options());
    auto r = client.list(pods(), "ns");
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, Errc::decode) << r.error().to_string();
    EXPECT_TRUE(r.error().message.starts_with("pods list item 1: ")) << r.error().message;
    EXPECT_TRUE(stream->wait_client_closed(5s)) << "the half-read connection was kept";
    server.on("GET", "/api/v1/namespaces/ns/pods", [&](const Request&) {
      return protobuf ? protobuf_reply(pod_list_proto()) : Reply::json(pod_list_json());
    });
    expect_next_list_on_a_new_connection(server, client);
  }
}

// A codec that throws, as a codec's bug (or bad_alloc while decoding) would, inside a list body.
class ThrowingCodec : public Codec {
 public:
  Result<std::shared_ptr<Object>> decode(const JsonValue& /*value*/) const override {
    throw std::runtime_error("codec bug");
  }
  std::string encode(const Object& /*object*/) const override { return "{}"; }
};

TEST(ProtobufRestClient, ListCodecThatThrowsMidBodyIsADecodeErrorOnAClosedConnection) {
  const ResourceType throwing{pods().gvr, std::make_shared<ThrowingCodec>()};
  FakeApiServer server;
  auto stream = std::make_shared<ScriptedStream>();
  server.on("GET", "/api/v1/namespaces/ns/pods", [&](const Request&) {
    stream->send(R"({"items":[{"kind":"Pod"},)");  // and never end()
    return stream_reply(stream, false);
  });
  RestClient client(server.cluster_config(), protobuf_options());
  auto r = client.list(throwing, "ns");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::decode) << r.error().to_string();
  EXPECT_TRUE(r.error().message.starts_with(
      "GET /api/v1/namespaces/ns/pods: decoding the response body threw in body bytes 0-"))
      << r.error().message;
  EXPECT_TRUE(r.error().message.ends_with(": codec bug")) << r.error().message;
  EXPECT_TRUE(stream->wait_client_closed(5s)) << "the half-read connection was kept";
  server.on("GET", "/api/v1/namespaces/ns/pods",
            [&](const Request&) { return Reply::json(pod_list_json()); });
  expect_next_list_on_a_new_connection(server, client);
}

TEST(ProtobufRestClient, ListCodecThatThrowsAtTheBodysEndIsADecodeError) {
  // A number that ends the body completes an item only in finish(), after the exchange.
  const ResourceType throwing{pods().gvr, std::make_shared<ThrowingCodec>()};
  FakeApiServer server;
  server.on("GET", "/api/v1/namespaces/ns/pods",
            [](const Request&) { return Reply::json(R"({"items":[1)"); });
  RestClient client(server.cluster_config(), protobuf_options());
  auto r = client.list(throwing, "ns");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::decode) << r.error().to_string();
  EXPECT_EQ(r.error().message, "pods: decoding the list response threw at its end: codec bug");
}

TEST(ProtobufRestClient, ListErrorStatusesAreMappedAsBefore) {
  FakeApiServer server;
  server.on("GET", "/api/v1/namespaces/ns/pods", [](const Request&) {
    return Reply::api_status(410, "Expired", "The provided continue parameter is too old");
  });
  for (bool protobuf : {true, false}) {
    RestClient client(server.cluster_config(), protobuf_options(protobuf));
    auto r = client.list(pods(), "ns");
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, Errc::api);
    EXPECT_EQ(r.error().http_status, 410);
    EXPECT_EQ(r.error().reason, "Expired");
  }
  server.on("GET", "/api/v1/namespaces/ns/pods",
            [](const Request&) { return Reply::api_status(403, "Forbidden", "no", 3); });
  RestClient client(server.cluster_config(), protobuf_options(false));
  auto r = client.list(pods(), "ns");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().http_status, 403);
  EXPECT_EQ(r.error().reason, "Forbidden");
}

TEST(ProtobufRestClient, ListOnAStaleKeptAliveConnectionIsRetried) {
  FakeApiServer server;
  auto seen = std::make_shared<std::set<std::uint64_t>>();
  server.on("GET", "/api/v1/namespaces/ns/pods", [seen](const Request& r) {
    return seen->insert(r.connection).second ? protobuf_reply(pod_list_proto()) : Reply::dropped();
  });
  RestClient client(server.cluster_config(), protobuf_options());
  ASSERT_TRUE(client.list(pods(), "ns"));
  auto r = client.list(pods(), "ns");  // the kept connection is dropped: retried on a new one
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(r->items.size(), 2u);
  EXPECT_EQ(server.request_count(), 3u);
}

TEST(ProtobufRestClient, ListStalledMidBodyEndsAtTheRequestDeadline) {
  FakeApiServer server;
  auto stream = std::make_shared<ScriptedStream>();
  server.on("GET", "/api/v1/namespaces/ns/pods", [&](const Request&) {
    stream->send(pod_list_json().substr(0, 300));  // and never the rest
    return stream_reply(stream, false);
  });
  RestClientOptions options = protobuf_options();
  options.request_timeout = 300ms;  // the deadline covers the whole body, as before
  RestClient client(server.cluster_config(), options);
  auto r = client.list(pods(), "ns");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::timeout) << r.error().to_string();
}

}  // namespace
}  // namespace kinformer::client
