// JsonListDecoder: a JSON list body fed in pieces decodes to what a whole-body parse gave
// (the objects, resourceVersion, continue; the same errors, at the same byte offsets), holding
// one item at a time.
#include "kinformer/client/list_decoder.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <algorithm>

#include "kinformer/client/pod.h"
#include "list_streaming.h"
#include "protobuf_samples.h"
#include "test_resources.h"

namespace kinformer::client {
namespace {

// The decoder RestClient::list used before lists streamed: RapidJSON over the whole body (in
// situ, stopping at the value, then only whitespace), then metadata and the items.
Result<ObjectList> whole_body(std::string body) {
  const std::string gvr = pods().gvr.to_string();
  rapidjson::Document doc;
  const std::size_t size = body.size();
  rapidjson::InsituStringStream in(body.data());
  doc.ParseStream<rapidjson::kParseInsituFlag | rapidjson::kParseStopWhenDoneFlag>(in);
  auto syntax = [&](const std::string& reason, std::size_t at) {
    return Error::make(Errc::decode, gvr + ": list response is not valid JSON: " + reason +
                                         " at byte " + std::to_string(at));
  };
  if (doc.HasParseError()) {
    return syntax(rapidjson::GetParseError_En(doc.GetParseError()), doc.GetErrorOffset());
  }
  std::size_t end = in.Tell();
  while (end < size &&
         (body[end] == ' ' || body[end] == '\t' || body[end] == '\n' || body[end] == '\r')) {
    ++end;
  }
  if (end < size) return syntax("unexpected bytes after the JSON value", end);
  if (!doc.IsObject())
    return Error::make(Errc::decode, gvr + ": list response is not a JSON object");
  ObjectList out;
  if (auto md = doc.FindMember("metadata"); md != doc.MemberEnd() && md->value.IsObject()) {
    auto str = [&](const char* name) {
      auto m = md->value.FindMember(name);
      return m != md->value.MemberEnd() && m->value.IsString()
                 ? std::string(m->value.GetString(), m->value.GetStringLength())
                 : std::string();
    };
    out.resource_version = str("resourceVersion");
    out.continue_token = str("continue");
  }
  auto items = doc.FindMember("items");
  if (items != doc.MemberEnd() && items->value.IsArray()) {
    for (const auto& item : items->value.GetArray()) {
      auto obj = pods().codec->decode(item);
      if (!obj) {
        Error e = std::move(obj).error();
        e.message = gvr + " list item " + std::to_string(out.items.size()) + ": " + e.message;
        return e;
      }
      out.items.push_back(std::move(obj).value());
    }
  } else if (items != doc.MemberEnd() && !items->value.IsNull()) {
    return Error::make(Errc::decode, gvr + ": list items is not an array");
  }
  return out;
}

// Feeds `body` in pieces cut at `cuts` (offsets, ascending), then finishes.
Result<ObjectList> streamed(std::string_view body, const std::vector<std::size_t>& cuts,
                            JsonListDecoder::Options options = {}) {
  JsonListDecoder d(pods(), options);
  return testing::feed_in_pieces(d, body, cuts);
}

using testing::expect_same_list;

std::string pod(const std::string& name) { return one_line(testing::pod_json(name, "7")); }

// A list as the API server writes it.
std::string pod_list(int n) {
  std::string items;
  for (int i = 0; i < n; ++i) {
    if (i) items += ',';
    items += pod("p" + std::to_string(i));
  }
  return R"({"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1234","continue":"next-page"},"items":[)" +
         items + "]}";
}

// Keys in another order, unknown keys with brackets and quotes in strings, escapes, whitespace.
std::string odd_list() {
  return " {\n \"items\" : [ " + pod("a") + " ,\n" + pod("b") +
         R"( ] , "unknown": {"x": ["]", "}\"", {"y": [1, 2.5e3, true, false, null]}]},
  "kind" : "PodList", "num": -12.5, "metadata" : {"continue":"c\"\u00e9","resourceVersion":"99"},
  "apiVersion": "v1", "items": "the second items key is ignored"} )";
}

TEST(JsonListDecoder, EverySplitDecodesLikeTheWholeBody) {
  for (const std::string& body : {pod_list(3), odd_list()}) {
    const auto want = whole_body(body);
    ASSERT_TRUE(want) << want.error().to_string();
    for (std::size_t cut = 0; cut <= body.size(); ++cut) {
      expect_same_list(streamed(body, {cut}), want, "cut at " + std::to_string(cut));
    }
    std::vector<std::size_t> every(body.size());
    for (std::size_t i = 0; i < body.size(); ++i) every[i] = i;
    expect_same_list(streamed(body, every), want, "byte by byte");
  }
  auto got = streamed(pod_list(3), {});
  ASSERT_TRUE(got);
  EXPECT_EQ(got->resource_version, "1234");
  EXPECT_EQ(got->continue_token, "next-page");
  EXPECT_EQ(got->items.size(), 3u);
  got = streamed(odd_list(), {});
  ASSERT_TRUE(got);
  EXPECT_EQ(got->resource_version, "99");
  EXPECT_EQ(got->continue_token, "c\"\xc3\xa9");
  EXPECT_EQ(got->items.size(), 2u);
}

TEST(JsonListDecoder, EveryTruncationIsTheWholeBodyError) {
  for (const std::string& body : {pod_list(2), odd_list()}) {
    const std::size_t end = body.find_last_not_of(' ') + 1;  // the closing '}'
    for (std::size_t n = 0; n < end; ++n) {
      const std::string cut = body.substr(0, n);
      auto got = streamed(cut, {n / 2});
      ASSERT_FALSE(got) << "truncated to " << n << " bytes decoded as a list";
      expect_same_list(got, whole_body(cut), "truncated to " + std::to_string(n));
    }
  }
}

TEST(JsonListDecoder, MetadataAfterItemsAndNullItems) {
  auto got =
      streamed(R"({"items":[)" + pod("a") + R"(],"metadata":{"resourceVersion":"5"}})", {20});
  ASSERT_TRUE(got) << got.error().to_string();
  EXPECT_EQ(got->resource_version, "5");
  ASSERT_EQ(got->items.size(), 1u);
  EXPECT_EQ(got->items[0]->metadata.name, "a");
  got = streamed(R"({"metadata":{"resourceVersion":"6"},"items":null})", {30});
  ASSERT_TRUE(got) << got.error().to_string();
  EXPECT_EQ(got->resource_version, "6");
  EXPECT_TRUE(got->items.empty());
  got = streamed(R"({"kind":"PodList","items":[]})", {});
  ASSERT_TRUE(got) << got.error().to_string();
  EXPECT_TRUE(got->items.empty());
}

TEST(JsonListDecoder, MalformedBodiesGiveTheWholeBodyErrors) {
  const std::string good = pod("a");
  const std::vector<std::string> bodies = {
      "",
      "   ",
      "[1,2]",
      "\"a list\"",
      "nonsense",
      "{",
      "{}x",
      R"({"items":{}})",
      R"({"items":"x"})",
      R"({"items":[)" + good + R"(,]})",
      R"({"items":[)" + good + R"( )" + good + R"(]})",
      R"({"items":[{"metadata":{"name":"a"}]]})",
      R"({"items":[{"metadata":{"name":"a"}}}})",
      R"({"items":[{"metadata":{"name":"a\q"}}]})",
      "{\"items\":[{\"metadata\":{\"name\":\"a\x01\"}}]}",
      R"({"items":[tru]})",
      R"({"items":[1.]})",
      R"({"items":[)" + good + R"(],"metadata" {}})",
      R"({"items":[)" + good + R"(],"metadata":})",
      R"({"items":[)" + good + R"(] "kind":"PodList"})",
      R"({"items":[)" + good + R"(],,})",
      R"({,})",
      R"({"kind":"PodList",})",
      R"({"items":[{"metadata":"not an object"}]})",
      R"({"items":[)" + good + R"(,{"metadata":"not an object"}]})",
      R"({"items":[)" + good + R"(,7]})",
  };
  for (const std::string& body : bodies) {
    const auto want = whole_body(body);
    ASSERT_FALSE(want) << body;
    for (std::size_t cut = 0; cut <= body.size(); ++cut) {
      expect_same_list(streamed(body, {cut}), want, body + " cut at " + std::to_string(cut));
    }
  }
}

TEST(JsonListDecoder, MalformedItemNamesItsIndex) {
  auto got = streamed(
      R"({"items":[)" + pod("a") + "," + pod("b") + R"(,{"metadata":"not an object"}]})", {100});
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code, Errc::decode);
  EXPECT_TRUE(got.error().message.starts_with("pods list item 2: ")) << got.error().message;
}

TEST(JsonListDecoder, NestingBeyondTheLimitIsAnError) {
  const std::string deep(kMaxJsonDepth, '[');
  const std::string body = R"({"items":[{"a":)" + deep;
  auto got = streamed(body, {body.size() / 2});
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code, Errc::decode);
  // The item's object is level 3 of the body; its member's arrays go past 1000 at the 998th.
  EXPECT_EQ(got.error().message,
            "pods: list response is not valid JSON: JSON nested deeper than 1000 levels at byte " +
                std::to_string(15 + 998))
      << got.error().message;
}

TEST(JsonListDecoder, AnItemOverTheLimitIsTooLarge) {
  const std::string body = pod_list(3);
  const std::size_t item = pod("p0").size();
  auto fits = streamed(body, {body.size() / 3}, {item});
  ASSERT_TRUE(fits) << fits.error().to_string();
  auto got = streamed(body, {body.size() / 3}, {item - 1});
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code, Errc::too_large) << got.error().to_string();
  EXPECT_NE(got.error().message.find("list item 0"), std::string::npos) << got.error().message;
}

TEST(JsonListDecoder, HoldsOneItemNotTheBody) {
  const std::string body = pod_list(2000);  // about 1.7 MB of 850-byte items
  const std::size_t item = pod("p1000").size();
  ASSERT_GT(body.size(), 1000 * item);
  JsonListDecoder d(pods());
  std::size_t most = 0;
  for (std::size_t at = 0; at < body.size(); at += 4096) {
    ASSERT_TRUE(d.feed(std::string_view(body).substr(at, 4096)));
    most = std::max(most, d.buffer_capacity());
  }
  auto got = d.finish();
  ASSERT_TRUE(got) << got.error().to_string();
  EXPECT_EQ(got->items.size(), 2000u);
  EXPECT_LE(most, 4 * item) << "the decoder holds more than an item";
}

TEST(JsonListDecoder, ReleasesTheBufferOfALargeItem) {
  // One item over kKeptBufferBytes (a long annotation), then small ones.
  std::string big = R"({"metadata":{"name":"big","annotations":{"a":")" +
                    std::string(JsonListDecoder::kKeptBufferBytes + 1000, 'x') + R"("}}})";
  const std::string body = R"({"items":[)" + big + "," + pod("a") + "," + pod("b") + "]}";
  JsonListDecoder d(pods());
  const std::size_t after_big = testing::largest_buffer_after_first_item(d, body);
  auto got = d.finish();
  ASSERT_TRUE(got) << got.error().to_string();
  EXPECT_EQ(got->items.size(), 3u);
  EXPECT_LE(after_big, JsonListDecoder::kKeptBufferBytes);
}

}  // namespace
}  // namespace kinformer::client
