#include "kinformer/client/watch_decoder.h"

#include <gtest/gtest.h>

#include "kinformer/client/dynamic_object.h"

namespace kinformer::client {
namespace {

struct Decoded {
  std::vector<std::string> lines;  // "TYPE key rv json"
  std::optional<Error> error;
};

std::string describe(const WatchEvent& e) {
  static const char* names[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK"};
  const auto& obj = dynamic_cast<const DynamicObject&>(*e.object);
  return std::string(names[static_cast<int>(e.type)]) + " " + obj.key() + " " +
         obj.metadata.resource_version + " " + obj.json;
}

// Feeds `pieces` and finishes; collects every event and the first error.
Decoded run(const std::vector<std::string_view>& pieces, WatchDecoder::Options options = {}) {
  WatchDecoder decoder(dynamic_codec(), options);
  Decoded d;
  std::vector<WatchEvent> events;
  for (auto piece : pieces) {
    auto s = decoder.feed(piece, events);
    for (auto& e : events) d.lines.push_back(describe(e));
    events.clear();
    if (!s) {
      d.error = s.error();
      return d;
    }
  }
  if (auto s = decoder.finish(); !s) d.error = s.error();
  return d;
}

const std::string kStream =
    R"({"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","namespace":"ns","resourceVersion":"1","managedFields":[{"manager":"x"}]},"spec":{"nodeName":"n\u00e9"}}})"
    "\n"
    R"({"type":"MODIFIED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","namespace":"ns","resourceVersion":"2","labels":{"app":"caf√©-☃"}}}})"
    "\n"
    R"({"type":"DELETED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","namespace":"ns","resourceVersion":"3"}}})"
    "\n"
    R"({"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"4","annotations":{"k8s.io/initial-events-end":"true"}}}})"
    "\n";

TEST(WatchDecoder, DecodesEventsAndDropsManagedFields) {
  Decoded d = run({kStream});
  ASSERT_FALSE(d.error) << d.error->to_string();
  ASSERT_EQ(d.lines.size(), 4u);
  EXPECT_EQ(d.lines[0].rfind("ADDED ns/a 1 ", 0), 0u);
  EXPECT_EQ(d.lines[0].find("managedFields"), std::string::npos);
  EXPECT_EQ(d.lines[2].rfind("DELETED ns/a 3", 0), 0u);
  EXPECT_EQ(d.lines[3].rfind("BOOKMARK  4", 0), 0u);
}

// {"type":"ADDED","object":{...,"spec":[[...]]}} nested `depth` levels in all (the event
// envelope is level 1, the object level 2).
std::string nested_event(int depth) {
  int arrays = depth - 2;
  return R"({"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a"},"spec":)" +
         std::string(static_cast<std::size_t>(arrays), '[') +
         std::string(static_cast<std::size_t>(arrays), ']') + "}}\n";
}

TEST(WatchDecoder, NestingBeyondTheLimitIsADecodeError) {
  std::string ok = nested_event(kMaxJsonDepth);
  Decoded d = run({ok});
  ASSERT_FALSE(d.error) << d.error->to_string();
  EXPECT_EQ(d.lines.size(), 1u);

  d = run({nested_event(kMaxJsonDepth + 1)});
  ASSERT_TRUE(d.error);
  EXPECT_EQ(d.error->code, Errc::decode);
  EXPECT_NE(d.error->message.find("watch event at byte offset 0: JSON nested deeper than " +
                                  std::to_string(kMaxJsonDepth) + " levels"),
            std::string::npos)
      << d.error->message;
  EXPECT_TRUE(d.lines.empty());
}

// Deep enough to overflow the stack of a recursive parser; rejected long before.
TEST(WatchDecoder, HostileNestingDoesNotOverflowTheStack) {
  std::string line(1'000'000, '[');
  line.back() = '\n';
  Decoded d = run({line});
  ASSERT_TRUE(d.error);
  EXPECT_EQ(d.error->code, Errc::decode) << d.error->to_string();
}

TEST(WatchDecoder, TrailingBytesAfterTheEventAreAnError) {
  std::string event = R"({"type":"ADDED","object":{"kind":"Pod","metadata":{"name":"a"}}})";
  Decoded d = run({event + " \r\n"});  // whitespace (a CRLF line end) is fine
  ASSERT_FALSE(d.error) << d.error->to_string();
  EXPECT_EQ(d.lines.size(), 1u);

  for (const std::string& trailer :
       {std::string(R"( {"type":"DELETED"})"), std::string("x"), std::string("\0junk", 5)}) {
    d = run({event + trailer + "\n"});
    ASSERT_TRUE(d.error) << "trailer " << trailer;
    EXPECT_EQ(d.error->code, Errc::decode);
    EXPECT_NE(d.error->message.find("watch event at byte offset 0: unexpected bytes after the "
                                    "JSON value at byte " +
                                    std::to_string(event.size() + (trailer[0] == ' '))),
              std::string::npos)
        << d.error->message;
    EXPECT_TRUE(d.lines.empty());
  }
}

TEST(WatchDecoder, BookmarkKeepsAnnotations) {
  WatchDecoder decoder(dynamic_codec());
  std::vector<WatchEvent> events;
  ASSERT_TRUE(decoder.feed(kStream, events));
  ASSERT_EQ(events.size(), 4u);
  const auto* v = find_value(events[3].object->metadata.annotations, "k8s.io/initial-events-end");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(*v, "true");
  EXPECT_EQ(events[3].type, EventType::bookmark);
}

TEST(WatchDecoder, OneByteChunksGiveIdenticalEvents) {
  Decoded whole = run({kStream});
  std::vector<std::string_view> bytes;
  for (std::size_t i = 0; i < kStream.size(); ++i)
    bytes.push_back(std::string_view(kStream).substr(i, 1));
  Decoded d = run(bytes);
  ASSERT_FALSE(d.error);
  EXPECT_EQ(d.lines, whole.lines);
}

TEST(WatchDecoder, TwoWaySplitAtEveryOffsetGivesIdenticalEvents) {
  Decoded whole = run({kStream});
  std::string_view s(kStream);
  for (std::size_t i = 0; i <= s.size(); ++i) {
    Decoded d = run({s.substr(0, i), s.substr(i)});
    ASSERT_FALSE(d.error) << "split at " << i;
    ASSERT_EQ(d.lines, whole.lines) << "split at " << i;  // includes splits inside UTF-8 sequences
  }
}

TEST(WatchDecoder, TruncationAtEveryOffsetIsTruncatedNeverHalfAnObject) {
  Decoded whole = run({kStream});
  std::string_view s(kStream);
  for (std::size_t i = 0; i < s.size(); ++i) {
    Decoded d = run({s.substr(0, i)});
    bool at_boundary = i == 0 || s[i - 1] == '\n';
    if (at_boundary) {
      EXPECT_FALSE(d.error) << "cut at " << i;
    } else {
      ASSERT_TRUE(d.error) << "cut at " << i;
      EXPECT_EQ(d.error->code, Errc::truncated) << "cut at " << i;
    }
    // Only complete events, each identical to the uncut decode.
    ASSERT_LE(d.lines.size(), whole.lines.size());
    for (std::size_t k = 0; k < d.lines.size(); ++k) EXPECT_EQ(d.lines[k], whole.lines[k]);
  }
}

TEST(WatchDecoder, Error410Expired) {
  Decoded d = run(
      {R"J({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (5)","reason":"Expired","code":410}})J"
       "\n"});
  ASSERT_TRUE(d.error);
  EXPECT_EQ(d.error->code, Errc::api);
  EXPECT_EQ(d.error->http_status, 410);
  EXPECT_TRUE(d.error->is_expired());
  EXPECT_EQ(d.error->message, "too old resource version: 1 (5)");
}

TEST(WatchDecoder, Error504TooLargeResourceVersion) {
  Decoded d = run(
      {R"({"type":"ADDED","object":{"metadata":{"name":"x"}}})"
       "\n"
       R"({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Too large resource version: 100, current: 50","reason":"Timeout","details":{"causes":[{"reason":"ResourceVersionTooLarge","message":"Too large resource version"}],"retryAfterSeconds":1},"code":504}})"
       "\n"});
  ASSERT_EQ(d.lines.size(), 1u);  // the event before the error is delivered
  ASSERT_TRUE(d.error);
  EXPECT_EQ(d.error->http_status, 504);
  EXPECT_TRUE(d.error->is_resource_version_too_large());
  EXPECT_EQ(d.error->retry_after, std::chrono::seconds(1));
}

TEST(WatchDecoder, SizeLimit) {
  std::string big =
      R"({"type":"ADDED","object":{"metadata":{"name":")" + std::string(200, 'x') + "\"}}}\n";
  Decoded d = run({big}, WatchDecoder::Options{100});
  ASSERT_TRUE(d.error);
  EXPECT_EQ(d.error->code, Errc::too_large);
  // The limit also holds when the event arrives in small pieces (nothing is buffered past it).
  std::vector<std::string_view> pieces;
  for (std::size_t i = 0; i < big.size(); i += 7)
    pieces.push_back(std::string_view(big).substr(i, 7));
  d = run(pieces, WatchDecoder::Options{100});
  ASSERT_TRUE(d.error);
  EXPECT_EQ(d.error->code, Errc::too_large);
  EXPECT_FALSE(run({big}, WatchDecoder::Options{big.size()}).error);
}

TEST(WatchDecoder, MalformedLineNamesOffset) {
  std::string first = R"({"type":"ADDED","object":{"metadata":{"name":"x"}}})"
                      "\n";
  Decoded d = run({first + "{\"type\":\"ADDED\",\"object\":{\"metadata\":}}\n"});
  ASSERT_TRUE(d.error);
  EXPECT_EQ(d.error->code, Errc::decode);
  EXPECT_NE(d.error->message.find("offset " + std::to_string(first.size())), std::string::npos)
      << d.error->message;
  EXPECT_EQ(d.lines.size(), 1u);
  EXPECT_EQ(run({"{\"type\":\"WAT\",\"object\":{}}\n"}).error->code, Errc::decode);
  EXPECT_EQ(run({"[1,2]\n"}).error->code, Errc::decode);
  EXPECT_EQ(run({"{\"type\":\"ADDED\",\"object\":{\"metadata\":5}}\n"}).error->code, Errc::decode);
}

// One large event must not leave the stream holding its buffer for good (up to 16 MiB per
// watch); an ordinary one keeps it, so the next lines reuse it.
TEST(WatchDecoder, ReleasesTheBufferOfALargeEvent) {
  auto event = [](std::size_t name_bytes) {
    return R"({"type":"ADDED","object":{"metadata":{"name":")" + std::string(name_bytes, 'x') +
           "\"}}}\n";
  };
  WatchDecoder decoder(dynamic_codec());
  std::vector<WatchEvent> events;
  const std::string large = event(2 * WatchDecoder::kKeptBufferBytes);
  const std::size_t half = large.size() / 2;
  ASSERT_TRUE(decoder.feed(std::string_view(large).substr(0, half), events));
  EXPECT_GE(decoder.buffer_capacity(), half);  // carried between reads
  ASSERT_TRUE(decoder.feed(std::string_view(large).substr(half), events));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_LE(decoder.buffer_capacity(), WatchDecoder::kKeptBufferBytes);

  const std::string ordinary = event(WatchDecoder::kKeptBufferBytes / 2);
  ASSERT_TRUE(decoder.feed(ordinary, events));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_GE(decoder.buffer_capacity(), ordinary.size() - 1);  // kept for the next lines
  EXPECT_LE(decoder.buffer_capacity(), WatchDecoder::kKeptBufferBytes);
}

TEST(WatchDecoder, ErrorIsSticky) {
  WatchDecoder decoder(dynamic_codec());
  std::vector<WatchEvent> events;
  EXPECT_FALSE(decoder.feed("garbage\n", events));
  EXPECT_FALSE(decoder.feed(kStream, events));
  EXPECT_TRUE(events.empty());
}

}  // namespace
}  // namespace kinformer::client
