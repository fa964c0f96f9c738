// The protobuf watch stream decoder: the same events as the JSON WatchDecoder for the same
// objects, at every split point; truncation; the frame size limit; ERROR events; malformed frames.
#include "kinformer/client/protobuf_watch_decoder.h"

#include <gtest/gtest.h>

#include "kinformer/client/watch_decoder.h"
#include "protobuf_samples.h"
#include "test_resources.h"

namespace kinformer::client {
namespace {

using testing::envelope;
using testing::frame;
using testing::Msg;
using testing::watch_frame;

ProtobufCodecPtr pod_codec() { return protobuf_codec(ResourceTraits<Pod>::type()); }

struct ProtobufDecoded {
  std::vector<WatchEvent> events;
  std::optional<Error> error;
};

// Feeds `pieces` and finishes; collects every event and the first error.
ProtobufDecoded run_protobuf(const std::vector<std::string_view>& pieces,
                             ProtobufWatchDecoder::Options options = {}) {
  ProtobufWatchDecoder decoder(pod_codec(), options);
  ProtobufDecoded d;
  for (auto piece : pieces) {
    if (auto s = decoder.feed(piece, d.events); !s) {
      d.error = s.error();
      return d;
    }
  }
  if (auto s = decoder.finish(); !s) d.error = s.error();
  return d;
}

std::string pod_envelope(std::string_view name, std::string_view rv) {
  return envelope("v1", "Pod", testing::pod_proto(name, rv));
}

std::string bookmark_envelope() {
  return envelope("v1", "Pod",
                  Msg().msg(1, Msg().str(6, "4").entry(12, "k8s.io/initial-events-end", "true")));
}

// The same four events as a JSON watch body and as a protobuf one.
const std::string kJson =
    R"({"type":"ADDED","object":)" + one_line(testing::pod_json("a", "1")) + "}\n" +
    R"({"type":"MODIFIED","object":)" + one_line(testing::pod_json("a", "2")) + "}\n" +
    R"({"type":"DELETED","object":)" + one_line(testing::pod_json("a", "3")) + "}\n" +
    R"({"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"4","annotations":{"k8s.io/initial-events-end":"true"}}}})"
    "\n";
const std::string kProtobufStream =
    watch_frame("ADDED", pod_envelope("a", "1")) + watch_frame("MODIFIED", pod_envelope("a", "2")) +
    watch_frame("DELETED", pod_envelope("a", "3")) + watch_frame("BOOKMARK", bookmark_envelope());

void expect_same_events(const std::vector<WatchEvent>& got, const std::vector<WatchEvent>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].type, want[i].type) << "event " << i;
    testing::expect_same(dynamic_cast<const Pod&>(*got[i].object),
                         dynamic_cast<const Pod&>(*want[i].object));
  }
}

std::vector<WatchEvent> json_events() {
  WatchDecoder json(ResourceTraits<Pod>::type().codec);
  std::vector<WatchEvent> events;
  EXPECT_TRUE(json.feed(kJson, events).ok());
  EXPECT_TRUE(json.finish().ok());
  return events;
}

TEST(ProtobufWatchDecoder, SameEventsAsJson) {
  ProtobufDecoded d = run_protobuf({kProtobufStream});
  ASSERT_FALSE(d.error) << d.error->to_string();
  ASSERT_EQ(d.events.size(), 4u);
  expect_same_events(d.events, json_events());
  EXPECT_EQ(d.events[0].object->metadata.resource_version, "1");
  EXPECT_EQ(d.events[3].type, EventType::bookmark);
  const std::string* end =
      find_value(d.events[3].object->metadata.annotations, "k8s.io/initial-events-end");
  ASSERT_NE(end, nullptr);
  EXPECT_EQ(*end, "true");
}

TEST(ProtobufWatchDecoder, Counters) {
  ProtobufWatchDecoder decoder(pod_codec());
  std::vector<WatchEvent> out;
  std::string first = watch_frame("ADDED", pod_envelope("a", "1"));
  ASSERT_TRUE(
      decoder.feed(std::string_view(kProtobufStream).substr(0, first.size() + 3), out).ok());
  EXPECT_EQ(decoder.offset(), first.size() + 3);
  EXPECT_EQ(decoder.complete_frame_bytes(), first.size());
  EXPECT_EQ(decoder.events(), 1u);
}

TEST(ProtobufWatchDecoder, OneByteChunksGiveIdenticalEvents) {
  ProtobufDecoded whole = run_protobuf({kProtobufStream});
  std::vector<std::string_view> bytes;
  for (std::size_t i = 0; i < kProtobufStream.size(); ++i)
    bytes.push_back(std::string_view(kProtobufStream).substr(i, 1));
  ProtobufDecoded d = run_protobuf(bytes);
  ASSERT_FALSE(d.error) << d.error->to_string();
  expect_same_events(d.events, whole.events);
}

TEST(ProtobufWatchDecoder, TwoWaySplitAtEveryOffsetGivesIdenticalEvents) {
  ProtobufDecoded whole = run_protobuf({kProtobufStream});
  std::string_view s(kProtobufStream);
  for (std::size_t i = 0; i <= s.size(); ++i) {
    ProtobufDecoded d = run_protobuf({s.substr(0, i), s.substr(i)});
    ASSERT_FALSE(d.error) << "split at " << i << ": " << d.error->to_string();
    expect_same_events(d.events, whole.events);
    if (::testing::Test::HasFailure()) FAIL() << "split at " << i;
  }
}

TEST(ProtobufWatchDecoder, ThreeWaySplitsAroundEveryFrameHeader) {
  // Every split of the second frame's header and the bytes around it, with the rest whole.
  ProtobufDecoded whole = run_protobuf({kProtobufStream});
  std::string_view s(kProtobufStream);
  std::size_t second = watch_frame("ADDED", pod_envelope("a", "1")).size();
  for (std::size_t i = second - 3; i <= second + 6; ++i) {
    for (std::size_t j = i; j <= second + 6; ++j) {
      ProtobufDecoded d = run_protobuf({s.substr(0, i), s.substr(i, j - i), s.substr(j)});
      ASSERT_FALSE(d.error) << "split at " << i << "," << j;
      ASSERT_EQ(d.events.size(), whole.events.size()) << "split at " << i << "," << j;
    }
  }
}

TEST(ProtobufWatchDecoder, TruncationAtEveryOffsetIsTruncatedNeverHalfAnObject) {
  ProtobufDecoded whole = run_protobuf({kProtobufStream});
  std::vector<std::size_t> boundaries{0};
  for (const auto& f : {watch_frame("ADDED", pod_envelope("a", "1")),
                        watch_frame("MODIFIED", pod_envelope("a", "2")),
                        watch_frame("DELETED", pod_envelope("a", "3")),
                        watch_frame("BOOKMARK", bookmark_envelope())}) {
    boundaries.push_back(boundaries.back() + f.size());
  }
  ASSERT_EQ(boundaries.back(), kProtobufStream.size());
  std::string_view s(kProtobufStream);
  for (std::size_t i = 0; i < s.size(); ++i) {
    ProtobufDecoded d = run_protobuf({s.substr(0, i)});
    bool at_boundary = std::find(boundaries.begin(), boundaries.end(), i) != boundaries.end();
    if (at_boundary) {
      EXPECT_FALSE(d.error) << "cut at " << i;
    } else {
      ASSERT_TRUE(d.error) << "cut at " << i;
      EXPECT_EQ(d.error->code, Errc::truncated) << "cut at " << i;
    }
    // Only complete events, each identical to the uncut decode.
    ASSERT_LE(d.events.size(), whole.events.size());
    std::vector<WatchEvent> prefix(
        whole.events.begin(), whole.events.begin() + static_cast<std::ptrdiff_t>(d.events.size()));
    expect_same_events(d.events, prefix);
  }
}

TEST(ProtobufWatchDecoder, SizeLimit) {
  std::string big = watch_frame(
      "ADDED", envelope("v1", "Pod", Msg().msg(1, Msg().str(1, std::string(200, 'x')))));
  std::size_t payload = big.size() - 4;
  ProtobufDecoded d = run_protobuf({big}, {payload - 1});
  ASSERT_TRUE(d.error);
  EXPECT_EQ(d.error->code, Errc::too_large);
  EXPECT_NE(d.error->message.find("watch event at byte offset 0 (" + std::to_string(payload) +
                                  " bytes) exceeds the limit"),
            std::string::npos)
      << d.error->message;
  // Reported as soon as the length is known: nothing of the frame is buffered.
  ProtobufWatchDecoder decoder(pod_codec(), {payload - 1});
  std::vector<WatchEvent> out;
  auto s = decoder.feed(std::string_view(big).substr(0, 4), out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, Errc::too_large);
  // At the limit: fine, whole or in pieces.
  EXPECT_FALSE(run_protobuf({big}, {payload}).error);
  std::vector<std::string_view> pieces;
  for (std::size_t i = 0; i < big.size(); i += 7)
    pieces.push_back(std::string_view(big).substr(i, 7));
  ProtobufDecoded small = run_protobuf(pieces, {payload});
  EXPECT_FALSE(small.error);
  EXPECT_EQ(small.events.size(), 1u);
  // A length beyond what any limit allows (0xffffffff).
  EXPECT_EQ(run_protobuf({std::string("\xff\xff\xff\xff", 4)}).error->code, Errc::too_large);
}

TEST(ProtobufWatchDecoder, Error410Expired) {
  Msg status = Msg()
                   .msg(1, Msg())
                   .str(2, "Failure")
                   .str(3, "too old resource version: 1 (5)")
                   .str(4, "Expired")
                   .int32(6, 410);
  ProtobufDecoded d = run_protobuf({watch_frame("ADDED", pod_envelope("a", "1")) +
                                    watch_frame("ERROR", envelope("v1", "Status", status))});
  ASSERT_EQ(d.events.size(), 1u);  // the event before the error is delivered
  ASSERT_TRUE(d.error);
  EXPECT_EQ(d.error->code, Errc::api);
  EXPECT_EQ(d.error->http_status, 410);
  EXPECT_TRUE(d.error->is_expired());
  EXPECT_EQ(d.error->message, "too old resource version: 1 (5)");
}

TEST(ProtobufWatchDecoder, Error504TooLargeResourceVersion) {
  Msg status = Msg()
                   .str(3, "Too large resource version: 100, current: 50")
                   .str(4, "Timeout")
                   .msg(5, Msg().msg(4, Msg().str(1, "ResourceVersionTooLarge")).int32(5, 1))
                   .int32(6, 504);
  ProtobufDecoded d = run_protobuf({watch_frame("ERROR", envelope("v1", "Status", status))});
  ASSERT_TRUE(d.error);
  EXPECT_EQ(d.error->http_status, 504);
  EXPECT_TRUE(d.error->is_resource_version_too_large());
  EXPECT_EQ(d.error->retry_after, std::chrono::seconds(1));
  // A Status without a message still says what it was.
  d = run_protobuf({watch_frame("ERROR", envelope("v1", "Status", Msg().int32(6, 500)))});
  ASSERT_TRUE(d.error);
  EXPECT_EQ(d.error->message, "watch ERROR event");
}

void expect_decode_error(const std::string& body, std::string_view text) {
  std::string first = watch_frame("ADDED", pod_envelope("a", "1"));
  ProtobufDecoded d = run_protobuf({first + body});
  EXPECT_EQ(d.events.size(), 1u);
  ASSERT_TRUE(d.error) << text;
  EXPECT_EQ(d.error->code, Errc::decode) << d.error->to_string();
  EXPECT_NE(d.error->message.find("watch event at byte offset " + std::to_string(first.size())),
            std::string::npos)
      << d.error->message;
  EXPECT_NE(d.error->message.find(text), std::string::npos) << d.error->message;
}

TEST(ProtobufWatchDecoder, MalformedFramesNameTheOffset) {
  std::string pod = pod_envelope("b", "2");
  // The frame holds a bare WatchEvent: an envelope around it is an error saying so.
  expect_decode_error(
      frame(envelope("v1", "WatchEvent", Msg().str(1, "ADDED").msg(2, Msg().bytes(1, pod)))),
      "a k8s\\0 envelope around the event (frames hold bare WatchEvents)");
  expect_decode_error(frame("not protobuf"), "WatchEvent: object: malformed protobuf");
  std::string inner_magic = pod;
  inner_magic[0] = 'K';
  expect_decode_error(watch_frame("ADDED", inner_magic),
                      "object: not a Kubernetes protobuf message");
  expect_decode_error(watch_frame("ADDED", envelope("v1", "Secret", Msg())),
                      "object: expected kind Pod, got \"Secret\"");
  expect_decode_error(watch_frame("RENAMED", pod), "unknown event type \"RENAMED\"");
  expect_decode_error(frame(Msg().str(1, "ADDED").data()), "missing \"object\"");
  expect_decode_error(frame(Msg().str(1, "ADDED").str(2, "not a message").data()),
                      "WatchEvent: object: malformed protobuf");
  expect_decode_error(
      frame(Msg().varint(1, 1).msg(2, Msg().bytes(1, pod)).data()),
      "WatchEvent: type: expected a string (length-delimited), got wire type varint");
  expect_decode_error(
      frame(Msg().str(1, "ADDED").msg(2, Msg().varint(1, 3)).data()),
      "WatchEvent: object.raw: expected bytes (length-delimited), got wire type varint");
  expect_decode_error(
      watch_frame("ADDED", envelope("v1", "Pod",
                                    Msg()
                                        .msg(1, Msg().str(1, "b").str(3, "ns"))
                                        .msg(2, Msg().varint(11, 1).str(11, "x")))),
      "Pod ns/b: spec.hostNetwork: expected a boolean (varint), got wire type length-delimited");
  expect_decode_error(watch_frame("ERROR", envelope("v1", "Status", Msg().str(6, "410"))),
                      "ERROR object: Status: code: expected a 32-bit integer");
  expect_decode_error(frame(""), "an empty frame");
}

// One rule for ERROR events in both encodings: an ERROR event is an API error. Its Status gives
// code, reason and message; an object of another kind gives HTTP 500 and a message that says so
// without quoting the object (it could be a Secret).
TEST(WatchDecoders, ErrorEventsMeanTheSameInJsonAndProtobuf) {
  struct Case {
    const char* name;
    std::string json_object;
    std::string protobuf_object;
    int http_status;
    std::string reason;
    std::string message;
  };
  const std::string not_a_status =
      "watch event at byte offset 0: ERROR event whose object is not a Status";
  const std::vector<Case> cases = {
      {"an Expired Status",
       R"J({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (5)","reason":"Expired","code":410})J",
       envelope("v1", "Status",
                Msg()
                    .str(2, "Failure")
                    .str(3, "too old resource version: 1 (5)")
                    .str(4, "Expired")
                    .int32(6, 410)),
       410, "Expired", "too old resource version: 1 (5)"},
      {"a Status without code or message", R"({"kind":"Status","apiVersion":"v1","metadata":{}})",
       envelope("v1", "Status", Msg().str(2, "Failure")), 500, "", "watch ERROR event"},
      {"a Pod", one_line(testing::pod_json("a", "1")), pod_envelope("a", "1"), 500, "",
       not_a_status},
      {"a Secret",
       R"({"kind":"Secret","apiVersion":"v1","metadata":{"name":"s"},"message":"hunter2","data":{"password":"aHVudGVyMg=="}})",
       envelope("v1", "Secret", Msg().msg(1, Msg().str(1, "s")).entry(2, "password", "hunter2")),
       500, "", not_a_status},
  };
  for (const Case& c : cases) {
    WatchDecoder json(ResourceTraits<Pod>::type().codec);
    ProtobufWatchDecoder protobuf(pod_codec());
    std::vector<WatchEvent> events;
    const Status from_json =
        json.feed(R"({"type":"ERROR","object":)" + c.json_object + "}\n", events);
    const Status from_protobuf = protobuf.feed(watch_frame("ERROR", c.protobuf_object), events);
    EXPECT_TRUE(events.empty()) << c.name;
    for (const Status* s : {&from_json, &from_protobuf}) {
      const char* decoder = s == &from_json ? "JSON" : "protobuf";
      ASSERT_FALSE(s->ok()) << c.name << ", " << decoder;
      EXPECT_EQ(s->error().code, Errc::api) << c.name << ", " << decoder;
      EXPECT_EQ(s->error().http_status, c.http_status) << c.name << ", " << decoder;
      EXPECT_EQ(s->error().reason, c.reason) << c.name << ", " << decoder;
      EXPECT_EQ(s->error().message, c.message) << c.name << ", " << decoder;
    }
  }
}

TEST(ProtobufWatchDecoder, UnknownFieldsAreSkippedAtEveryLevel) {
  std::string object =
      std::string("k8s\0", 4) + Msg()
                                    .msg(1, Msg().str(1, "v1").str(2, "Pod").unknown())
                                    .str(2, testing::pod_proto("a", "1").data())
                                    .unknown()
                                    .data();
  Msg event = Msg().str(1, "ADDED").msg(2, Msg().bytes(1, object).unknown()).unknown();
  std::string body = frame(event.data());
  ProtobufDecoded d = run_protobuf({body});
  ASSERT_FALSE(d.error) << d.error->to_string();
  ASSERT_EQ(d.events.size(), 1u);
  std::vector<WatchEvent> json = json_events();
  json.resize(1);
  expect_same_events(d.events, json);
}

// A large frame split across reads is carried in a buffer; once decoded, its capacity goes (it
// would otherwise stay with the stream for good, up to 16 MiB per watch).
TEST(ProtobufWatchDecoder, ReleasesTheBufferOfALargeFrame) {
  auto event = [](std::size_t name_bytes) {
    return watch_frame(
        "ADDED", envelope("v1", "Pod",
                          Msg().msg(1, Msg().str(1, std::string(name_bytes, 'x')).str(3, "ns"))));
  };
  ProtobufWatchDecoder decoder(pod_codec());
  std::vector<WatchEvent> out;
  const std::string large = event(2 * ProtobufWatchDecoder::kKeptBufferBytes);
  const std::size_t half = large.size() / 2;
  ASSERT_TRUE(decoder.feed(std::string_view(large).substr(0, half), out));
  EXPECT_GE(decoder.buffer_capacity(), half - 4);  // carried between reads (without the length)
  ASSERT_TRUE(decoder.feed(std::string_view(large).substr(half), out));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_LE(decoder.buffer_capacity(), ProtobufWatchDecoder::kKeptBufferBytes);

  // An ordinary frame in pieces keeps its buffer for the next ones.
  const std::string ordinary = event(ProtobufWatchDecoder::kKeptBufferBytes / 2);
  ASSERT_TRUE(decoder.feed(std::string_view(ordinary).substr(0, 100), out));
  ASSERT_TRUE(decoder.feed(std::string_view(ordinary).substr(100), out));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_GE(decoder.buffer_capacity(), ordinary.size() - 4);
  EXPECT_LE(decoder.buffer_capacity(), ProtobufWatchDecoder::kKeptBufferBytes);
}

TEST(ProtobufWatchDecoder, ErrorIsSticky) {
  ProtobufWatchDecoder decoder(pod_codec());
  std::vector<WatchEvent> out;
  auto s = decoder.feed(watch_frame("RENAMED", pod_envelope("a", "1")), out);
  ASSERT_FALSE(s.ok());
  auto again = decoder.feed(kProtobufStream, out);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().message, s.error().message);
  EXPECT_TRUE(out.empty());
  EXPECT_FALSE(decoder.finish().ok());
}

}  // namespace
}  // namespace kinformer::client
