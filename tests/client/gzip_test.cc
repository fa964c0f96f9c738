// gzip-encoded response bodies: the decoder (client/src/gzip.h) at every split point, with its
// checks and its bound, and RestClient end to end against the scripted server (Accept-Encoding
// on GETs only, lists, get_raw, TLS, corrupt, truncated and expanding bodies).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "fake_apiserver.h"
#include "gzip.h"  // client/src: the decoder
#include "gzip_writer.h"
#include "kinformer/client/pod.h"
#include "kinformer/client/rest_client.h"
#include "protobuf_samples.h"
#include "test_resources.h"

namespace kinformer::client {
namespace {

using namespace std::chrono_literals;
using detail::GzipDecoder;
using kinformer::testing::FakeApiServer;
using kinformer::testing::FakeApiServerOptions;
using kinformer::testing::Reply;
using kinformer::testing::Request;
using kinformer::testing::ScriptedStream;
using testing::envelope;
using testing::Msg;

// Text that compresses (repeats) with enough variety that deflate emits several blocks.
std::string sample_text(std::size_t n, unsigned seed = 7) {
  std::mt19937 rng(seed);
  std::string out;
  const std::vector<std::string> words = {"pod",      "namespace", "kube-system",   "app=web",
                                          "10.0.0.1", "ready",     "{\"k\":\"v\"}", "\n"};
  while (out.size() < n) out += words[rng() % words.size()];
  out.resize(n);
  return out;
}

struct Gunzipped {
  Status status = Ok{};
  std::string out;
  std::vector<std::size_t> pieces;
};

// Feeds `body` cut at `cuts` (ascending offsets), then finish() unless a feed failed.
Gunzipped gunzip(const std::string& body, const std::vector<std::size_t>& cuts,
                 std::size_t max_output = std::size_t{1} << 30) {
  GzipDecoder d(max_output, "GET /test");
  Gunzipped r;
  auto out = [&](std::string_view piece) -> Status {
    r.out.append(piece);
    r.pieces.push_back(piece.size());
    return Ok{};
  };
  std::size_t at = 0;
  std::vector<std::size_t> ends = cuts;
  ends.push_back(body.size());
  for (std::size_t end : ends) {
    r.status = d.feed(std::string_view(body).substr(at, end - at), out);
    if (!r.status) return r;
    at = end;
  }
  r.status = d.finish();
  return r;
}

TEST(GzipDecoder, DecodesAtEverySplitPointAndByteByByte) {
  const std::string text = sample_text(3000);
  const std::string body = kinformer::testing::gzip(text);
  ASSERT_LT(body.size(), text.size());
  for (std::size_t cut = 0; cut <= body.size(); ++cut) {
    auto r = gunzip(body, {cut});
    ASSERT_TRUE(r.status) << "cut at " << cut << ": " << r.status.error().to_string();
    ASSERT_EQ(r.out, text) << "cut at " << cut;
  }
  std::vector<std::size_t> every;
  for (std::size_t i = 1; i < body.size(); ++i) every.push_back(i);
  auto r = gunzip(body, every);
  ASSERT_TRUE(r.status) << r.status.error().to_string();
  EXPECT_EQ(r.out, text);
}

TEST(GzipDecoder, HandsOutPiecesOfAtMost64KiBInOrder) {
  const std::string text = sample_text(std::size_t{1} << 20);  // 1 MiB
  auto r = gunzip(kinformer::testing::gzip(text), {});
  ASSERT_TRUE(r.status) << r.status.error().to_string();
  EXPECT_EQ(r.out, text);
  ASSERT_GT(r.pieces.size(), 1u);
  for (std::size_t n : r.pieces) EXPECT_LE(n, std::size_t{64} * 1024);
}

TEST(GzipDecoder, ReadsMembersInARow) {
  const std::string a = sample_text(500, 1), b = sample_text(700, 2);
  const std::string body = kinformer::testing::gzip(a) + kinformer::testing::gzip(b, 9);
  for (std::size_t cut = 0; cut <= body.size(); cut += 7) {
    auto r = gunzip(body, {cut});
    ASSERT_TRUE(r.status) << "cut at " << cut << ": " << r.status.error().to_string();
    ASSERT_EQ(r.out, a + b) << "cut at " << cut;
  }
}

TEST(GzipDecoder, AnEmptyBodyIsAnEmptyBody) {
  auto r = gunzip("", {});
  EXPECT_TRUE(r.status);
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(r.pieces.empty());
}

TEST(GzipDecoder, ABodyCutAnywhereBeforeItsTrailerIsTruncated) {
  const std::string text = sample_text(2000);
  const std::string body = kinformer::testing::gzip(text);
  for (std::size_t len = 1; len < body.size(); ++len) {
    auto r = gunzip(body.substr(0, len), {});
    ASSERT_FALSE(r.status) << "length " << len;
    EXPECT_EQ(r.status.error().code, Errc::decode) << "length " << len;
    EXPECT_NE(r.status.error().message.find("GET /test"), std::string::npos);
    EXPECT_NE(r.status.error().message.find("truncated"), std::string::npos)
        << r.status.error().message;
  }
}

TEST(GzipDecoder, AWrongChecksumOrLengthIsAnError) {
  const std::string text = sample_text(2000);
  const std::string body = kinformer::testing::gzip(text);
  std::string bad_crc = body;
  bad_crc[bad_crc.size() - 8] = static_cast<char>(bad_crc[bad_crc.size() - 8] ^ 0x01);
  auto r = gunzip(bad_crc, {});
  ASSERT_FALSE(r.status);
  EXPECT_EQ(r.status.error().code, Errc::decode);
  EXPECT_NE(r.status.error().message.find("incorrect data check"), std::string::npos)
      << r.status.error().message;

  std::string bad_length = body;
  bad_length[bad_length.size() - 4] = static_cast<char>(bad_length[bad_length.size() - 4] ^ 0x01);
  r = gunzip(bad_length, {});
  ASSERT_FALSE(r.status);
  EXPECT_NE(r.status.error().message.find("incorrect length check"), std::string::npos)
      << r.status.error().message;
}

TEST(GzipDecoder, BytesThatAreNotGzipAreAnErrorThatSaysWhere) {
  auto r = gunzip(R"({"kind":"PodList"})", {});
  ASSERT_FALSE(r.status);
  EXPECT_EQ(r.status.error().code, Errc::decode);
  EXPECT_NE(r.status.error().message.find("gzip-encoded body: incorrect header check"),
            std::string::npos)
      << r.status.error().message;

  // A member, then bytes that do not start another.
  const std::string text = sample_text(300);
  r = gunzip(kinformer::testing::gzip(text) + "trailing", {});
  ASSERT_FALSE(r.status);
  EXPECT_EQ(r.out, text);
  EXPECT_NE(r.status.error().message.find("incorrect header check"), std::string::npos);
}

TEST(GzipDecoder, ABodyThatExpandsPastTheLimitIsTooLarge) {
  const std::string zeros(std::size_t{1} << 20, '\0');  // 1 MiB of zeros: about 1 KiB gzipped
  const std::string body = kinformer::testing::gzip(zeros);
  ASSERT_LT(body.size(), std::size_t{8} * 1024);
  auto r = gunzip(body, {}, std::size_t{64} * 1024);
  ASSERT_FALSE(r.status);
  EXPECT_EQ(r.status.error().code, Errc::too_large);
  EXPECT_NE(r.status.error().message.find("max_response_bytes"), std::string::npos);
  EXPECT_LE(r.out.size(), std::size_t{64} * 1024);
  // Exactly at the limit is fine; one byte less is not.
  EXPECT_TRUE(gunzip(body, {}, zeros.size()).status);
  EXPECT_FALSE(gunzip(body, {}, zeros.size() - 1).status);
}

TEST(GzipDecoder, TheReceiversErrorStopsItAsItIs) {
  GzipDecoder d(1 << 20, "GET /test");
  int calls = 0;
  auto s = d.feed(kinformer::testing::gzip(sample_text(200000)), [&](std::string_view) -> Status {
    ++calls;
    return Error::make(Errc::cancelled, "receiver stopped");
  });
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, Errc::cancelled);
  EXPECT_EQ(s.error().message, "receiver stopped");
  EXPECT_EQ(calls, 1);
}

// --- RestClient against the scripted server --------------------------------------------------

// What kube-apiserver does: a body compressed when the request accepts gzip.
Reply maybe_gzipped(const Request& req, Reply r) {
  if (req.header("accept-encoding") != "gzip") return r;
  r.body = kinformer::testing::gzip(r.body);
  r.headers.emplace_back("Content-Encoding", "gzip");
  r.headers.emplace_back("Vary", "Accept-Encoding");
  return r;
}

std::string pod_list_of(int n) {
  Msg list;
  list.msg(1, Msg().str(2, "100"));
  for (int i = 0; i < n; ++i) {
    list.msg(2, testing::pod_proto("p" + std::to_string(i), std::to_string(i + 1)));
  }
  return envelope("v1", "PodList", list);
}

TEST(GzipRestClient, GetsAcceptGzipAndListsDecodeGzippedProtobufAndJson) {
  FakeApiServer server;
  server.on("GET", "/api/v1/namespaces/ns/pods", [](const Request& req) {
    return maybe_gzipped(req, protobuf_reply(pod_list_of(300)));
  });
  server.on("GET", "/api/v1/namespaces/js/pods", [](const Request& req) {
    return maybe_gzipped(req, Reply::json(R"({"kind":"PodList","apiVersion":"v1","metadata":)"
                                          R"({"resourceVersion":"9"},"items":[)" +
                                          testing::pod_json("a", "1") + "]}"));
  });
  RestClient client(server.cluster_config(), unlimited());
  auto r = client.list(pods(), "ns");
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(server.requests().at(0).header("accept-encoding"), "gzip");
  ASSERT_EQ(r->items.size(), 300u);
  EXPECT_EQ(r->items[299]->metadata.name, "p299");
  EXPECT_EQ(r->resource_version, "100");

  auto j = client.list(pods(), "js");
  ASSERT_TRUE(j) << j.error().to_string();
  ASSERT_EQ(j->items.size(), 1u);
  EXPECT_EQ(j->items[0]->metadata.name, "a");
  EXPECT_EQ(j->resource_version, "9");
}

TEST(GzipRestClient, GetRawSaysTheEncodingAndGivesTheDecodedBody) {
  FakeApiServer server;
  const std::string body = R"({"items":")" + sample_text(200000) + R"("})";
  server.on("GET", "/raw",
            [&](const Request& req) { return maybe_gzipped(req, Reply::json(body)); });
  RestClient client(server.cluster_config(), unlimited());
  auto r = client.get_raw("/raw");
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(r->content_encoding, "gzip");
  EXPECT_EQ(r->body, body);
  EXPECT_EQ(r->header("Content-Encoding"), "");
  EXPECT_EQ(r->header("Content-Length"), "");  // it was the encoded length
  EXPECT_EQ(r->header("Content-Type"), "application/json");
  // The connection is reused: the whole gzip body was read.
  auto again = client.get_raw("/raw");
  ASSERT_TRUE(again) << again.error().to_string();
  EXPECT_EQ(again->body, body);
  EXPECT_EQ(server.requests().at(1).connection, server.requests().at(0).connection);
}

TEST(GzipRestClient, OptionOffSendsNoAcceptEncodingAndWritesAndWatchesNeverDo) {
  FakeApiServer server;
  auto stream = std::make_shared<ScriptedStream>();
  server.on("GET", "/api/v1/namespaces/ns/pods", [&](const Request& req) {
    if (req.param("watch")) return Reply::streaming(stream);
    return maybe_gzipped(req, protobuf_reply(pod_list_of(2)));
  });
  server.on("DELETE", "/api/v1/namespaces/ns/pods/a",
            [](const Request&) { return Reply::json(R"({"kind":"Status","status":"Success"})"); });
  {
    RestClient client(server.cluster_config(), unlimited());
    auto w = client.watch(pods(), "ns", {});
    ASSERT_TRUE(w) << w.error().to_string();
    ASSERT_TRUE(client.delete_(pods(), "ns", "a"));
    stream->end();
  }
  RestClientOptions off = unlimited();
  off.gzip = false;
  RestClient client(server.cluster_config(), off);
  auto r = client.list(pods(), "ns");
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(r->items.size(), 2u);
  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 3u);
  for (const auto& req : reqs) {
    EXPECT_EQ(req.header("accept-encoding"), "") << req.method << " " << req.target;
  }
}

// A list whose items all decoded is still refused when its checksum fails: the bytes are not
// the server's. Corrupt data inside the stream is a decode error too (from zlib, or from the
// list decoder when the damaged bytes still inflate).
TEST(GzipRestClient, ACorruptGzippedListIsADecodeErrorAndTheNextRequestWorks) {
  FakeApiServer server;
  int calls = 0;
  server.on("GET", "/api/v1/namespaces/ns/pods", [&](const Request& req) {
    Reply r = maybe_gzipped(req, protobuf_reply(pod_list_of(50)));
    ++calls;
    if (calls == 1) r.body[r.body.size() - 8] = static_cast<char>(r.body[r.body.size() - 8] ^ 1);
    if (calls == 2) r.body[r.body.size() / 2] = static_cast<char>(r.body[r.body.size() / 2] ^ 0x55);
    return r;
  });
  RestClient client(server.cluster_config(), unlimited());
  auto bad_crc = client.list(pods(), "ns");
  ASSERT_FALSE(bad_crc);
  EXPECT_EQ(bad_crc.error().code, Errc::decode);
  EXPECT_NE(bad_crc.error().message.find("GET /api/v1/namespaces/ns/pods"), std::string::npos)
      << bad_crc.error().message;
  EXPECT_NE(bad_crc.error().message.find("gzip-encoded body: incorrect data check"),
            std::string::npos)
      << bad_crc.error().message;
  auto bad_data = client.list(pods(), "ns");
  ASSERT_FALSE(bad_data);
  EXPECT_EQ(bad_data.error().code, Errc::decode) << bad_data.error().to_string();
  auto good = client.list(pods(), "ns");
  ASSERT_TRUE(good) << good.error().to_string();
  EXPECT_EQ(good->items.size(), 50u);
}

TEST(GzipRestClient, AGzippedBodyCutShortIsTruncatedNotAShortList) {
  FakeApiServer server;
  server.on("GET", "/api/v1/namespaces/ns/pods", [](const Request& req) {
    Reply r = maybe_gzipped(req, protobuf_reply(pod_list_of(50)));
    r.body.resize(r.body.size() - 6);  // a complete HTTP response whose gzip lacks its trailer
    return r;
  });
  RestClient client(server.cluster_config(), unlimited());
  auto r = client.list(pods(), "ns");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::decode);
  EXPECT_NE(r.error().message.find("truncated"), std::string::npos) << r.error().message;
}

TEST(GzipRestClient, ASmallBodyThatExpandsPastMaxResponseBytesIsTooLarge) {
  FakeApiServer server;
  server.on("GET", "/raw", [](const Request&) {
    Reply r =
        Reply::json(kinformer::testing::gzip(std::string(std::size_t{4} << 20, ' ')));  // 4 MiB
    r.headers.emplace_back("Content-Encoding", "gzip");
    return r;
  });
  RestClientOptions o = unlimited();
  o.max_response_bytes = std::size_t{1} << 20;
  RestClient client(server.cluster_config(), o);
  auto r = client.get_raw("/raw");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::too_large);
  EXPECT_NE(r.error().message.find("max_response_bytes"), std::string::npos) << r.error().message;
}

TEST(GzipRestClient, EncodingNamesAreReadAsHttpSaysAndIdentityIsNone) {
  FakeApiServer server;
  const std::string body = R"({"a":")" + sample_text(1000) + R"("})";
  for (const std::string encoding : {"x-gzip", " GZip ", "identity"}) {
    server.on("GET", "/raw", [&](const Request&) {
      Reply r = Reply::json(encoding == "identity" ? body : kinformer::testing::gzip(body));
      r.headers.emplace_back("Content-Encoding", encoding);
      return r;
    });
    RestClient client(server.cluster_config(), unlimited());
    auto r = client.get_raw("/raw");
    ASSERT_TRUE(r) << encoding << ": " << r.error().to_string();
    EXPECT_EQ(r->body, body) << encoding;
    EXPECT_EQ(r->content_encoding, encoding == "identity" ? ""
                                   : encoding == "x-gzip" ? "x-gzip"
                                                          : "gzip");
  }
}

TEST(GzipRestClient, AnEncodingItNeverAskedForIsAnErrorThatNamesIt) {
  FakeApiServer server;
  server.on("GET", "/raw", [](const Request&) {
    Reply r = Reply::json("{}");
    r.headers.emplace_back("Content-Encoding", "br");
    return r;
  });
  RestClient client(server.cluster_config(), unlimited());
  auto r = client.get_raw("/raw");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::decode);
  EXPECT_NE(r.error().message.find("'br'"), std::string::npos) << r.error().message;
}

// An error response whose body cannot be read still says what happened through its status and
// headers: a 429 keeps its Retry-After, a 503 with a broken gzip body stays a 503.
TEST(GzipRestClient, AnErrorResponseWithAnUnreadableBodyKeepsItsStatus) {
  FakeApiServer server;
  server.on("GET", "/api/v1/namespaces/ns/pods", [](const Request&) {
    Reply r = Reply::text("\x1b\x2f compressed with brotli", 429);
    r.headers.emplace_back("Content-Encoding", "br");
    r.headers.emplace_back("Retry-After", "3");
    return r;
  });
  server.on("GET", "/api/v1/namespaces/other/pods", [](const Request&) {
    Reply r = Reply::api_status(503, "ServiceUnavailable", "try later");
    r.body = kinformer::testing::gzip(r.body).substr(0, 12);  // cut inside the deflate data
    r.headers.emplace_back("Content-Encoding", "gzip");
    return r;
  });
  RestClient client(server.cluster_config(), unlimited());
  auto r = client.list(pods(), "ns");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().http_status, 429) << r.error().to_string();
  ASSERT_TRUE(r.error().retry_after.has_value()) << r.error().to_string();
  EXPECT_EQ(*r.error().retry_after, std::chrono::seconds(3));
  auto o = client.list(pods(), "other");
  ASSERT_FALSE(o);
  EXPECT_EQ(o.error().http_status, 503) << o.error().to_string();
  // Both bodies were read to their end: the connection was kept and reused.
  ASSERT_EQ(server.requests().size(), 2u);
  EXPECT_EQ(server.requests()[1].connection, server.requests()[0].connection);
}

TEST(GzipRestClient, AGzippedListThatExpandsPastMaxResponseBytesIsTooLarge) {
  FakeApiServer server;
  server.on("GET", "/api/v1/namespaces/ns/pods", [](const Request& req) {
    return maybe_gzipped(req, protobuf_reply(pod_list_of(2000)));
  });
  RestClientOptions o = unlimited();
  o.max_response_bytes = 64 * 1024;  // the gzipped body is far below it, the list far above
  RestClient client(server.cluster_config(), o);
  auto r = client.list(pods(), "ns");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::too_large) << r.error().to_string();
  EXPECT_NE(r.error().message.find("gzip-encoded body decompresses to more than 65536 bytes"),
            std::string::npos)
      << r.error().message;
}

TEST(GzipRestClient, AGzippedErrorStatusIsStillMapped) {
  FakeApiServer server;
  server.on("GET", "/api/v1/namespaces/ns/pods", [](const Request& req) {
    return maybe_gzipped(req, Reply::api_status(403, "Forbidden", "pods is forbidden: user x"));
  });
  RestClientOptions o = unlimited();
  o.protobuf = false;
  RestClient client(server.cluster_config(), o);
  auto r = client.list(pods(), "ns");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().http_status, 403);
  EXPECT_NE(r.error().message.find("pods is forbidden: user x"), std::string::npos)
      << r.error().message;
}

TEST(GzipRestClient, GzippedListOverTls) {
  FakeApiServer server(FakeApiServerOptions{.tls = true});
  server.on("GET", "/api/v1/namespaces/ns/pods", [](const Request& req) {
    return maybe_gzipped(req, protobuf_reply(pod_list_of(500)));
  });
  RestClient client(server.cluster_config(), unlimited());
  auto r = client.list(pods(), "ns");
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(r->items.size(), 500u);
  EXPECT_EQ(server.requests().at(0).header("accept-encoding"), "gzip");
}

}  // namespace
}  // namespace kinformer::client
