// ProtobufListDecoder: a protobuf list body fed in pieces (tags, lengths and items split
// anywhere) decodes to what decode_protobuf_list() gives for the whole body, with its errors,
// holding one item at a time.
#include "kinformer/client/protobuf_list_decoder.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "kinformer/client/pod.h"
#include "list_streaming.h"
#include "protobuf_samples.h"

namespace kinformer::client {
namespace {

using testing::Msg;

ProtobufCodecPtr list_codec() { return protobuf_codec(ResourceTraits<Pod>::type()); }

// "k8s\0" + runtime.Unknown{typeMeta, raw = list, and `trailer` (further envelope fields)}.
std::string body_of(const Msg& list, const Msg& trailer = Msg()) {
  return std::string("k8s\0", 4) + Msg()
                                       .msg(1, Msg().str(1, "v1").str(2, "PodList"))
                                       .str(2, list.data())
                                       .raw(trailer.data())
                                       .data();
}

// A list as the API server writes it: metadata first, unknown fields of every wire type, and
// (Go's runtime.Unknown marshalling) empty contentEncoding and contentType after raw.
Msg protobuf_pod_list(int n) {
  Msg list;
  list.msg(1, Msg().str(2, "1234").str(3, "next-page").unknown());
  for (int i = 0; i < n; ++i) {
    list.msg(2, testing::pod_proto("p" + std::to_string(i), "7"));
    if (i == 0) list.unknown();
  }
  return list;
}
const Msg kGoTrailer = Msg().str(3, "").str(4, "");

Result<ObjectList> protobuf_streamed(std::string_view body, const std::vector<std::size_t>& cuts,
                                     ProtobufListDecoder::Options options = {}) {
  ProtobufListDecoder d(list_codec(), options);
  return testing::feed_in_pieces(d, body, cuts);
}

using testing::expect_same_list;

TEST(ProtobufListDecoder, EverySplitDecodesLikeTheWholeBody) {
  // Metadata after the items, and a large item (a 3-byte length) too.
  Msg late;
  late.msg(2, testing::pod_proto("a", "1"))
      .msg(2, Msg().msg(
                  1, testing::pod_meta_proto("big", "2").entry(12, "big", std::string(20000, 'x'))))
      .msg(1, Msg().str(2, "55"));
  for (const std::string& body : {body_of(protobuf_pod_list(3), kGoTrailer), body_of(late)}) {
    const auto want = decode_protobuf_list(*list_codec(), body);
    ASSERT_TRUE(want) << want.error().to_string();
    for (std::size_t cut = 0; cut <= body.size(); ++cut) {
      expect_same_list(protobuf_streamed(body, {cut}), want, "cut at " + std::to_string(cut));
    }
    std::vector<std::size_t> every(body.size());
    for (std::size_t i = 0; i < body.size(); ++i) every[i] = i;
    expect_same_list(protobuf_streamed(body, every), want, "byte by byte");
  }
  auto got = protobuf_streamed(body_of(protobuf_pod_list(3), kGoTrailer), {});
  ASSERT_TRUE(got);
  EXPECT_EQ(got->resource_version, "1234");
  EXPECT_EQ(got->continue_token, "next-page");
  EXPECT_EQ(got->items.size(), 3u);
  got = protobuf_streamed(body_of(late), {});
  ASSERT_TRUE(got);
  EXPECT_EQ(got->resource_version, "55");
  ASSERT_EQ(got->items.size(), 2u);
  EXPECT_EQ(got->items[1]->metadata.name, "big");
}

TEST(ProtobufListDecoder, EveryTruncationIsAnError) {
  const std::string body = body_of(protobuf_pod_list(2));  // raw is the last field
  for (std::size_t n = 0; n < body.size(); ++n) {
    const std::string cut = body.substr(0, n);
    auto got = protobuf_streamed(cut, {n / 2});
    ASSERT_FALSE(got) << "truncated to " << n << " bytes decoded as a list";
    EXPECT_EQ(got.error().code, Errc::decode);
    EXPECT_TRUE(got.error().message.starts_with("pods list response: ")) << got.error().message;
    // Where the whole-body decoder saw an error too, it is the same one (it took a body cut
    // before raw for an empty list).
    auto whole = decode_protobuf_list(*list_codec(), cut);
    if (!whole) {
      EXPECT_EQ(got.error().message, whole.error().message) << n;
    }
  }
  // With Go's trailing empty fields, a cut after raw loses nothing: the same list or an error.
  const std::string go = body_of(protobuf_pod_list(2), kGoTrailer);
  const auto want = decode_protobuf_list(*list_codec(), go);
  for (std::size_t n = body.size(); n < go.size(); ++n) {
    auto got = protobuf_streamed(go.substr(0, n), {n - 1});
    if (got) expect_same_list(got, want, std::to_string(n));
  }
}

TEST(ProtobufListDecoder, MalformedBodiesGiveTheWholeBodyErrors) {
  const Msg pod = testing::pod_proto("a", "1");
  const std::vector<std::string> bodies = {
      std::string("k8s"),
      std::string("k9s\0", 4),
      std::string("{\"kind\":\"PodList\"}"),
      std::string("k8s\0", 4) + Msg().msg(1, Msg().str(2, "SecretList")).str(2, "").data(),
      std::string("k8s\0", 4) + Msg().varint(2, 5).data(),
      std::string("k8s\0", 4) + Msg().varint(1, 5).data(),
      std::string("k8s\0", 4) + Msg().str(2, "").str(3, "gzip").data(),
      std::string("k8s\0", 4) + Msg().str(2, "").raw("\x1b").data(),  // wire type 3
      std::string("k8s\0", 4) + Msg().str(2, "").raw("\x02").data(),  // tag 0
      body_of(Msg().msg(2, pod).varint(2, 1)),
      body_of(Msg().msg(2, pod).varint(1, 1)),
      body_of(Msg().msg(2, pod).raw("\x12\x05\x0a")),  // item longer than raw
      body_of(Msg().msg(2, pod).raw("\x0a\x05\x0a")),  // metadata longer than raw
      body_of(Msg().msg(2, pod).raw("\x12")),          // raw ends inside a tag... of a length
      body_of(Msg().msg(2, pod).raw("\x92")),          // raw ends inside a tag
      body_of(Msg().msg(2, pod).raw("\x19\x01\x02")),  // fixed64 past the end of raw
      body_of(Msg().msg(2, pod).msg(2, Msg().varint(1, 3))),  // item 1: metadata is a varint
      body_of(Msg().msg(1, Msg().varint(2, 3))),              // ListMeta: resourceVersion a varint
  };
  for (const std::string& body : bodies) {
    const auto want = decode_protobuf_list(*list_codec(), body);
    ASSERT_FALSE(want) << body.size();
    for (std::size_t cut = 0; cut <= body.size(); ++cut) {
      expect_same_list(protobuf_streamed(body, {cut}), want, "cut at " + std::to_string(cut));
    }
  }
  auto got = protobuf_streamed(body_of(Msg().msg(2, pod).msg(2, Msg().varint(1, 3))), {});
  ASSERT_FALSE(got);
  EXPECT_TRUE(got.error().message.starts_with("pods list item 1: ")) << got.error().message;
}

TEST(ProtobufListDecoder, BodiesTheWholeBodyDecoderMisreadAreErrors) {
  // No raw: a body cut after the typeMeta would otherwise be an empty list.
  const std::string no_raw = std::string("k8s\0", 4) + Msg().msg(1, Msg().str(2, "PodList")).data();
  auto got = protobuf_streamed(no_raw, {});
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().message,
            "pods list response: no raw field (the list) in the runtime.Unknown");
  // Two raws: the items of the first are out already.
  got = protobuf_streamed(body_of(Msg(), Msg().str(2, "")), {});
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().message,
            "pods list response: runtime.Unknown: raw: more than one raw field");
}

TEST(ProtobufListDecoder, AnItemOverTheLimitIsTooLargeOnceItsLengthIsRead) {
  const std::string item = testing::pod_proto("a", "1").data();
  const std::string body = body_of(Msg().msg(2, testing::pod_proto("a", "1")));
  ASSERT_TRUE(protobuf_streamed(body, {}, {item.size()}));
  // The item's bytes start 3 bytes (tag, 2-byte length) after raw's: feed up to them only.
  const std::size_t item_at = body.find(item);
  ASSERT_NE(item_at, std::string::npos);
  ProtobufListDecoder d(list_codec(), {item.size() - 1});
  auto s = d.feed(std::string_view(body).substr(0, item_at));
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, Errc::too_large);
  EXPECT_NE(s.error().message.find("pods list item 0"), std::string::npos) << s.error().message;
}

TEST(ProtobufListDecoder, HoldsOneItemNotTheBody) {
  const std::string body = body_of(protobuf_pod_list(3000), kGoTrailer);  // about 1.5 MB
  const std::size_t item = testing::pod_proto("p1000", "7").data().size();
  ASSERT_GT(body.size(), 1000 * item);
  ProtobufListDecoder d(list_codec());
  std::size_t most = 0;
  for (std::size_t at = 0; at < body.size(); at += 1000) {  // items always split
    ASSERT_TRUE(d.feed(std::string_view(body).substr(at, 1000)));
    most = std::max(most, d.buffer_capacity());
  }
  auto got = d.finish();
  ASSERT_TRUE(got) << got.error().to_string();
  EXPECT_EQ(got->items.size(), 3000u);
  EXPECT_LE(most, 4 * item) << "the decoder holds more than an item";
}

TEST(ProtobufListDecoder, ReleasesTheBufferOfALargeItem) {
  Msg list;
  list.msg(
      2, Msg().msg(1, testing::pod_meta_proto("big", "1")
                          .entry(12, "big",
                                 std::string(ProtobufListDecoder::kKeptBufferBytes + 1000, 'x'))));
  list.msg(2, testing::pod_proto("a", "1")).msg(2, testing::pod_proto("b", "1"));
  const std::string body = body_of(list);
  ProtobufListDecoder d(list_codec());
  const std::size_t after_big = testing::largest_buffer_after_first_item(d, body);
  auto got = d.finish();
  ASSERT_TRUE(got) << got.error().to_string();
  EXPECT_EQ(got->items.size(), 3u);
  EXPECT_LE(after_big, ProtobufListDecoder::kKeptBufferBytes);
}

}  // namespace
}  // namespace kinformer::client
