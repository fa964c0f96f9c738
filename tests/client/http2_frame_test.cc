// HTTP/2 framing (client/src/http2/frame.h): frame headers on the wire, the reader fed whole, in
// two pieces at every point and byte by byte, its SETTINGS_MAX_FRAME_SIZE bound; every frame
// type decoded and each rule of RFC 9113 §6 a frame can break, with the error code, scope and
// message; header blocks joined from HEADERS and CONTINUATION, their sequence rule and bound;
// and every writer read back through the reader, the decoder and (for headers) HPACK.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <variant>
#include <vector>

#include "hex_bytes.h"
#include "http2/frame.h"  // client/src
#include "http2/hpack.h"

namespace kinformer::client {
namespace {

using detail::append_client_preface;
using detail::append_data;
using detail::append_goaway;
using detail::append_headers;
using detail::append_ping;
using detail::append_rst_stream;
using detail::append_settings_ack;
using detail::append_window_update;
using detail::ClientSettings;
using detail::ContinuationFrame;
using detail::DataFrame;
using detail::decode_frame;
using detail::DecodedFrame;
using detail::ErrorCode;
using detail::ErrorScope;
using detail::Frame;
using detail::FrameHeader;
using detail::FrameReader;
using detail::FrameType;
using detail::GoawayFrame;
using detail::HeaderBlock;
using detail::HeaderBlockAssembler;
using detail::HeadersFrame;
using detail::Http2Error;
using detail::Http2Result;
using detail::IgnoredFrame;
using detail::PeerSettings;
using detail::PingData;
using detail::PingFrame;
using detail::RstStreamFrame;
using detail::Setting;
using detail::SettingId;
using detail::SettingsFrame;
using detail::WindowUpdateFrame;
using kinformer::testing::hex_bytes;
using ::testing::HasSubstr;

constexpr std::uint8_t kEndStream = detail::kFlagEndStream;
constexpr std::uint8_t kAck = detail::kFlagAck;
constexpr std::uint8_t kEndHeaders = detail::kFlagEndHeaders;
constexpr std::uint8_t kPadded = detail::kFlagPadded;
constexpr std::uint8_t kPriority = detail::kFlagPriority;

// A frame as a test builds it: header fields and a payload it owns (decoded frames point into
// it, so it must outlive them).
struct TestFrame {
  FrameType type = FrameType::data;
  std::uint8_t flags = 0;
  std::uint32_t stream_id = 0;
  std::string payload;

  [[nodiscard]] FrameHeader header() const {
    return {static_cast<std::uint32_t>(payload.size()), type, flags, stream_id};
  }
  [[nodiscard]] Frame frame() const { return {header(), payload}; }
  [[nodiscard]] std::string wire() const {
    std::string out;
    header().append_to(out);
    return out + payload;
  }
};

// Decodes `f`, which must decode to a T.
template <typename T>
T decoded_as(const TestFrame& f) {
  auto r = decode_frame(f.frame());
  EXPECT_TRUE(r) << r.error().message;
  if (!r) return T{};
  EXPECT_TRUE(std::holds_alternative<T>(*r)) << "alternative " << r->index();
  return std::holds_alternative<T>(*r) ? std::get<T>(*r) : T{};
}

// The error of decoding `f`, which must fail.
Http2Error decode_error_of(const TestFrame& f) {
  auto r = decode_frame(f.frame());
  EXPECT_FALSE(r) << "decoded as alternative " << r->index();
  return r ? Http2Error{} : r.error();
}

void expect_connection_error(const Http2Error& e, ErrorCode code, std::string_view message) {
  EXPECT_EQ(e.code, code) << detail::error_code_name(e.code) << ": " << e.message;
  EXPECT_EQ(e.scope, ErrorScope::connection) << e.message;
  EXPECT_EQ(e.stream_id, 0u);
  EXPECT_EQ(e.message, message);
}

// A frame as the reader handed it out, its payload copied.
struct ReadFrame {
  FrameHeader header;
  std::string payload;
  friend bool operator==(const ReadFrame&, const ReadFrame&) = default;
};

// Reads `wire` fed in pieces cut at `cuts` (ascending offsets), which must hold only whole,
// acceptable frames; checks the reader never holds more than one frame.
std::vector<ReadFrame> read_frames_cut(std::string_view wire, const std::vector<std::size_t>& cuts,
                                       FrameReader& reader) {
  std::vector<ReadFrame> frames;
  std::size_t at = 0;
  std::vector<std::size_t> ends = cuts;
  ends.push_back(wire.size());
  for (std::size_t end : ends) {
    std::string_view in = wire.substr(at, end - at);
    at = end;
    while (true) {
      auto r = reader.read(in);
      EXPECT_TRUE(r) << r.error().message;
      if (!r || !*r) break;
      frames.push_back({(*r)->header, std::string((*r)->payload)});
      EXPECT_LE(reader.buffered(), detail::kFrameHeaderSize + reader.max_frame_size());
    }
    EXPECT_TRUE(in.empty());
    EXPECT_LE(reader.buffered(), detail::kFrameHeaderSize + reader.max_frame_size());
  }
  EXPECT_EQ(reader.buffered(), 0u) << "bytes left over: a frame cut short";
  return frames;
}

std::vector<ReadFrame> read_frames(std::string_view wire,
                                   std::uint32_t max_frame_size = detail::kDefaultMaxFrameSize) {
  FrameReader reader(max_frame_size);
  return read_frames_cut(wire, {}, reader);
}

// Reads and decodes `wire`, which must hold one frame, and returns it as a T; `keep` holds the
// payload the result points into.
template <typename T>
T read_one_as(std::string_view wire, TestFrame& keep) {
  const auto frames = read_frames(wire);
  EXPECT_EQ(frames.size(), 1u);
  if (frames.size() != 1) return T{};
  keep = {frames[0].header.type, frames[0].header.flags, frames[0].header.stream_id,
          frames[0].payload};
  return decoded_as<T>(keep);
}

// --- constants -------------------------------------------------------------------------------

TEST(Http2Constants, ClientPrefaceIsRfc9113s) {
  // §3.4: the 24 octets 0x505249202a20485454502f322e300d0a0d0a534d0d0a0d0a.
  EXPECT_EQ(detail::kClientPreface, hex_bytes("505249202a20485454502f322e300d0a0d0a534d0d0a0d0a"));
  EXPECT_EQ(detail::kClientPreface.size(), 24u);
}

TEST(Http2Constants, NamesEveryErrorCodeFrameTypeAndSetting) {
  const std::vector<std::string> codes = {"NO_ERROR",
                                          "PROTOCOL_ERROR",
                                          "INTERNAL_ERROR",
                                          "FLOW_CONTROL_ERROR",
                                          "SETTINGS_TIMEOUT",
                                          "STREAM_CLOSED",
                                          "FRAME_SIZE_ERROR",
                                          "REFUSED_STREAM",
                                          "CANCEL",
                                          "COMPRESSION_ERROR",
                                          "CONNECT_ERROR",
                                          "ENHANCE_YOUR_CALM",
                                          "INADEQUATE_SECURITY",
                                          "HTTP_1_1_REQUIRED"};
  for (std::uint32_t i = 0; i < codes.size(); ++i) {
    EXPECT_EQ(detail::error_code_name(static_cast<ErrorCode>(i)), codes[i]);
  }
  EXPECT_EQ(detail::error_code_name(static_cast<ErrorCode>(0xe)), "error code 0xe");
  EXPECT_EQ(detail::error_code_name(static_cast<ErrorCode>(0xdeadbeef)), "error code 0xdeadbeef");

  const std::vector<std::string> types = {"DATA",          "HEADERS",      "PRIORITY", "RST_STREAM",
                                          "SETTINGS",      "PUSH_PROMISE", "PING",     "GOAWAY",
                                          "WINDOW_UPDATE", "CONTINUATION"};
  for (std::uint8_t i = 0; i < types.size(); ++i) {
    EXPECT_EQ(detail::frame_type_name(static_cast<FrameType>(i)), types[i]);
  }
  EXPECT_EQ(detail::frame_type_name(static_cast<FrameType>(0xa)), "frame type 0xa");

  const std::vector<std::string> settings = {
      "SETTINGS_HEADER_TABLE_SIZE",   "SETTINGS_ENABLE_PUSH",    "SETTINGS_MAX_CONCURRENT_STREAMS",
      "SETTINGS_INITIAL_WINDOW_SIZE", "SETTINGS_MAX_FRAME_SIZE", "SETTINGS_MAX_HEADER_LIST_SIZE"};
  for (std::uint16_t i = 0; i < settings.size(); ++i) {
    EXPECT_EQ(detail::setting_name(static_cast<SettingId>(i + 1)), settings[i]);
  }
  EXPECT_EQ(detail::setting_name(static_cast<SettingId>(8)), "setting 0x8");
}

TEST(Http2Constants, PeerSettingsStartAtTheInitialValuesAndApplyInOrder) {
  PeerSettings s;
  EXPECT_EQ(s.header_table_size, 4096u);
  EXPECT_EQ(s.max_concurrent_streams, std::nullopt);
  EXPECT_EQ(s.initial_window_size, 65535u);
  EXPECT_EQ(s.max_frame_size, 16384u);
  EXPECT_EQ(s.max_header_list_size, std::nullopt);

  // As a server sends them: the same id twice (the last wins), an unknown one (dropped).
  TestFrame f{FrameType::settings, 0, 0,
              hex_bytes("0003 00000064"     // MAX_CONCURRENT_STREAMS 100
                        "0004 00010000"     // INITIAL_WINDOW_SIZE 65536
                        "0009 00000001"     // SETTINGS_NO_RFC7540_PRIORITIES (RFC 9218)
                        "0004 7fffffff"     // INITIAL_WINDOW_SIZE again
                        "0005 00ffffff"     // MAX_FRAME_SIZE 2^24 - 1
                        "0006 00010000"     // MAX_HEADER_LIST_SIZE 65536
                        "0001 00000000"     // HEADER_TABLE_SIZE 0
                        "0002 00000000")};  // ENABLE_PUSH 0
  const auto frame = decoded_as<SettingsFrame>(f);
  EXPECT_FALSE(frame.ack);
  EXPECT_EQ(frame.settings, (std::vector<Setting>{{SettingId::max_concurrent_streams, 100},
                                                  {SettingId::initial_window_size, 65536},
                                                  {SettingId::initial_window_size, 0x7fffffff},
                                                  {SettingId::max_frame_size, 0xffffff},
                                                  {SettingId::max_header_list_size, 65536},
                                                  {SettingId::header_table_size, 0},
                                                  {SettingId::enable_push, 0}}));
  s.apply(frame);
  EXPECT_EQ(s.header_table_size, 0u);
  EXPECT_EQ(s.max_concurrent_streams, 100u);
  EXPECT_EQ(s.initial_window_size, 0x7fffffffu);
  EXPECT_EQ(s.max_frame_size, 0xffffffu);
  EXPECT_EQ(s.max_header_list_size, 65536u);

  s.apply(SettingsFrame{true, {}});  // an ACK changes nothing
  EXPECT_EQ(s.max_frame_size, 0xffffffu);
}

// --- frame headers ---------------------------------------------------------------------------

TEST(Http2FrameHeader, ParsesTheNineBytesIgnoringTheReservedBit) {
  const std::string bytes = hex_bytes("004001 01 25 80000003");
  const FrameHeader h = FrameHeader::parse(bytes);
  EXPECT_EQ(h.length, 16385u);
  EXPECT_EQ(h.type, FrameType::headers);
  EXPECT_EQ(h.flags, 0x25);
  EXPECT_TRUE(h.has(kEndStream));
  EXPECT_TRUE(h.has(kEndHeaders));
  EXPECT_TRUE(h.has(kPriority));
  EXPECT_FALSE(h.has(kPadded));
  EXPECT_EQ(h.stream_id, 3u);

  std::string out;
  h.append_to(out);
  EXPECT_EQ(out, hex_bytes("004001 01 25 00000003"));  // the reserved bit is sent as 0

  // Only the first nine bytes count.
  EXPECT_EQ(FrameHeader::parse(bytes + "more"), h);
}

TEST(Http2FrameHeader, RoundTripsTheLargestValues) {
  const FrameHeader h{0xffffff, static_cast<FrameType>(0xff), 0xff, 0x7fffffff};
  std::string out;
  h.append_to(out);
  EXPECT_EQ(out, hex_bytes("ffffff ff ff 7fffffff"));
  EXPECT_EQ(FrameHeader::parse(out), h);
  EXPECT_EQ(FrameHeader::parse(hex_bytes("000000 00 00 00000000")), FrameHeader{});
}

// --- the reader ------------------------------------------------------------------------------

// A server's first frames, one of each kind a client takes, some padded: what the reader and
// the decoder are fed whole and in pieces.
std::string server_frames() {
  std::string wire;
  wire += TestFrame{FrameType::settings, 0, 0, hex_bytes("0003 00000064 0004 00100000")}.wire();
  append_settings_ack(wire);
  wire += TestFrame{FrameType::headers, kEndHeaders | kPadded, 1,
                    hex_bytes("03") + "block" + std::string(3, '\0')}
              .wire();
  append_data(wire, 1, std::string(20000, 'd'), false, 16384);
  wire +=
      TestFrame{FrameType::data, kEndStream | kPadded, 1, hex_bytes("02") + "end" + "pp"}.wire();
  append_ping(wire, PingData{1, 2, 3, 4, 5, 6, 7, 8}, false);
  append_window_update(wire, 0, 1000);
  wire += TestFrame{static_cast<FrameType>(0xc), 0, 0, "extension"}.wire();
  append_goaway(wire, 1, ErrorCode::no_error, "bye");
  return wire;
}

TEST(Http2FrameReader, ReadsFramesWholeWithoutCopying) {
  const std::string wire = server_frames();
  FrameReader reader;
  std::string_view in = wire;
  std::vector<FrameType> types;
  while (true) {
    auto r = reader.read(in);
    ASSERT_TRUE(r) << r.error().message;
    if (!*r) break;
    types.push_back((*r)->header.type);
    // The payload is a view into the bytes handed in.
    EXPECT_GE((*r)->payload.data(), wire.data());
    EXPECT_LE((*r)->payload.data() + (*r)->payload.size(), wire.data() + wire.size());
    EXPECT_EQ((*r)->payload.size(), (*r)->header.length);
    EXPECT_EQ(reader.buffered(), 0u);
  }
  EXPECT_TRUE(in.empty());
  EXPECT_EQ(types, (std::vector<FrameType>{
                       FrameType::settings, FrameType::settings, FrameType::headers,
                       FrameType::data, FrameType::data, FrameType::data, FrameType::ping,
                       FrameType::window_update, static_cast<FrameType>(0xc), FrameType::goaway}));
}

TEST(Http2FrameReader, ReadsTheSameFramesHoweverTheBytesAreCut) {
  const std::string wire = server_frames();
  const std::vector<ReadFrame> whole = read_frames(wire);
  ASSERT_EQ(whole.size(), 10u);
  EXPECT_EQ(whole[3].payload, std::string(16384, 'd'));
  EXPECT_EQ(whole[4].payload, std::string(20000 - 16384, 'd'));

  // Byte by byte: the payloads come out of the reader's buffer, which never holds more than
  // the frame being read.
  {
    FrameReader reader;
    std::vector<std::size_t> cuts;
    for (std::size_t i = 1; i < wire.size(); ++i) cuts.push_back(i);
    EXPECT_EQ(read_frames_cut(wire, cuts, reader), whole);
  }
  // In two pieces: cut at every point of the small frames at either end, and every 97 bytes of
  // the large DATA frames between them.
  for (std::size_t cut = 0; cut <= wire.size();
       cut += cut > 120 && cut + 120 < wire.size() ? 97 : 1) {
    FrameReader reader;
    ASSERT_EQ(read_frames_cut(wire, {cut}, reader), whole) << "cut at " << cut;
  }
}

TEST(Http2FrameReader, HoldsOnlyTheFrameBeingReadAndFreesItOnceHandedOut) {
  std::string wire;
  append_data(wire, 1, std::string(16384, 'x'), false, 16384);
  FrameReader reader;
  std::string_view in = std::string_view(wire).substr(0, 5);
  auto r = reader.read(in);
  ASSERT_TRUE(r && !*r);
  EXPECT_EQ(reader.buffered(), 5u);  // half a header
  in = std::string_view(wire).substr(5, 104);
  r = reader.read(in);
  ASSERT_TRUE(r && !*r);
  EXPECT_EQ(reader.buffered(), 100u);  // the header is parsed; 100 bytes of payload kept
  in = std::string_view(wire).substr(109);
  r = reader.read(in);
  ASSERT_TRUE(r && *r);
  EXPECT_EQ((*r)->payload, std::string(16384, 'x'));
  EXPECT_EQ(reader.buffered(), 0u);
  EXPECT_GE(reader.buffer_capacity(), 16384u);  // the payload handed out lives there
  in = {};
  r = reader.read(in);
  ASSERT_TRUE(r && !*r);
  EXPECT_EQ(reader.buffered(), 0u);
  EXPECT_LT(reader.buffer_capacity(), 100u);  // and is freed by the next call
}

TEST(Http2FrameReader, AnEmptyFrameIsCompleteWithItsHeader) {
  std::string wire;
  append_settings_ack(wire);
  FrameReader reader;
  std::string_view in = wire;
  auto r = reader.read(in);
  ASSERT_TRUE(r && *r);
  EXPECT_EQ((*r)->header, (FrameHeader{0, FrameType::settings, kAck, 0}));
  EXPECT_TRUE((*r)->payload.empty());
  r = reader.read(in);
  ASSERT_TRUE(r);
  EXPECT_FALSE(*r);
}

TEST(Http2FrameReader, RefusesAFrameAboveMaxFrameSizeFromItsHeaderAlone) {
  {
    // Exactly the maximum is fine.
    std::string wire;
    append_data(wire, 1, std::string(16384, 'x'), true, 16384);
    EXPECT_EQ(read_frames(wire).size(), 1u);
  }
  FrameReader reader;
  // The header of a 16,385-byte DATA frame, without its payload: refused at once.
  const std::string header = hex_bytes("004001 00 00 00000001");
  std::string_view in = header;
  auto r = reader.read(in);
  ASSERT_FALSE(r);
  expect_connection_error(r.error(), ErrorCode::frame_size_error,
                          "DATA frame on stream 1: length 16385 is above our "
                          "SETTINGS_MAX_FRAME_SIZE (16384)");
  EXPECT_TRUE(in.empty());
  EXPECT_EQ(reader.buffered(), 0u);
  EXPECT_TRUE(reader.failed());
  // Unusable from then on.
  std::string more;
  append_settings_ack(more);
  in = more;
  r = reader.read(in);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            "DATA frame on stream 1: length 16385 is above our "
            "SETTINGS_MAX_FRAME_SIZE (16384)");
}

TEST(Http2FrameReader, TakesLargerFramesOnceMaxFrameSizeIsRaised) {
  FrameReader reader(65535);
  EXPECT_EQ(reader.max_frame_size(), 65535u);
  std::string wire;
  append_data(wire, 1, std::string(65535, 'x'), false, 65535);
  EXPECT_EQ(read_frames_cut(wire, {1000}, reader).size(), 1u);

  reader.set_max_frame_size(detail::kMaxFrameSizeLimit);
  wire.clear();
  append_data(wire, 3, std::string(detail::kMaxFrameSizeLimit, 'y'), false,
              detail::kMaxFrameSizeLimit);
  const auto frames = read_frames_cut(wire, {70000}, reader);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].header.length, detail::kMaxFrameSizeLimit);

  reader.set_max_frame_size(16384);  // and lower again
  const std::string header = hex_bytes("004001 00 00 00000001");
  std::string_view in = header;
  auto r = reader.read(in);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::frame_size_error);

  FrameReader small;  // the default, and the header of a frame one byte too large
  const std::string large = hex_bytes("010000 01 04 00000001");
  in = large;
  r = small.read(in);
  ASSERT_FALSE(r);
  expect_connection_error(r.error(), ErrorCode::frame_size_error,
                          "HEADERS frame on stream 1: length 65536 is above our "
                          "SETTINGS_MAX_FRAME_SIZE (16384)");
}

// --- decoding: DATA --------------------------------------------------------------------------

TEST(Http2Decode, DataWithAndWithoutPadding) {
  {
    TestFrame f{FrameType::data, 0, 1, "hello"};
    const auto d = decoded_as<DataFrame>(f);
    EXPECT_EQ(d.stream_id, 1u);
    EXPECT_FALSE(d.end_stream);
    EXPECT_EQ(d.data, "hello");
    EXPECT_EQ(d.flow_controlled_size, 5u);
  }
  {
    // Padded: the Pad Length and padding are stripped but still count for flow control.
    TestFrame f{FrameType::data, kPadded | kEndStream, 7, hex_bytes("04") + "hello" + "PPPP"};
    const auto d = decoded_as<DataFrame>(f);
    EXPECT_EQ(d.stream_id, 7u);
    EXPECT_TRUE(d.end_stream);
    EXPECT_EQ(d.data, "hello");
    EXPECT_EQ(d.flow_controlled_size, 10u);
  }
  {
    // Padding may take all but the Pad Length: no data.
    TestFrame f{FrameType::data, kPadded, 1, hex_bytes("03") + "PPP"};
    const auto d = decoded_as<DataFrame>(f);
    EXPECT_EQ(d.data, "");
    EXPECT_EQ(d.flow_controlled_size, 4u);
  }
  {
    // Flags DATA does not define (ACK's bit is END_STREAM here; 0x04, 0x20 and 0x80) are ignored.
    TestFrame f{FrameType::data, 0xa4, 1, "x"};
    const auto d = decoded_as<DataFrame>(f);
    EXPECT_FALSE(d.end_stream);
    EXPECT_EQ(d.data, "x");
  }
}

TEST(Http2Decode, RefusesDataOnStreamZero) {
  expect_connection_error(decode_error_of({FrameType::data, 0, 0, "x"}), ErrorCode::protocol_error,
                          "DATA frame on stream 0: this type belongs to a stream, and stream 0 "
                          "is the connection");
}

TEST(Http2Decode, RefusesDataPaddingAsLongAsThePayload) {
  expect_connection_error(
      decode_error_of({FrameType::data, kPadded, 1, hex_bytes("04") + "PPP"}),
      ErrorCode::protocol_error,
      "DATA frame on stream 1: padding of 4 bytes does not fit in its 4-byte payload after the "
      "Pad Length");
  expect_connection_error(
      decode_error_of({FrameType::data, kPadded, 1, hex_bytes("ff") + "x"}),
      ErrorCode::protocol_error,
      "DATA frame on stream 1: padding of 255 bytes does not fit in its 2-byte payload after the "
      "Pad Length");
  expect_connection_error(decode_error_of({FrameType::data, kPadded, 3, ""}),
                          ErrorCode::frame_size_error,
                          "DATA frame on stream 3: PADDED, but its payload of 0 bytes has no room "
                          "for the Pad Length");
}

// --- decoding: HEADERS and CONTINUATION ------------------------------------------------------

TEST(Http2Decode, HeadersStripsPaddingAndPriority) {
  {
    TestFrame f{FrameType::headers, kEndHeaders, 1, "block"};
    const auto h = decoded_as<HeadersFrame>(f);
    EXPECT_EQ(h.stream_id, 1u);
    EXPECT_FALSE(h.end_stream);
    EXPECT_TRUE(h.end_headers);
    EXPECT_EQ(h.fragment, "block");
  }
  {
    // PRIORITY: stream dependency (exclusive, on 3) and weight before the fragment.
    TestFrame f{FrameType::headers, kPriority | kEndStream, 5, hex_bytes("80000003 10") + "block"};
    const auto h = decoded_as<HeadersFrame>(f);
    EXPECT_EQ(h.stream_id, 5u);
    EXPECT_TRUE(h.end_stream);
    EXPECT_FALSE(h.end_headers);
    EXPECT_EQ(h.fragment, "block");
  }
  {
    // Both: Pad Length, priority fields, fragment, padding.
    TestFrame f{FrameType::headers, kPadded | kPriority | kEndHeaders, 9,
                hex_bytes("02 00000001 ff") + "block" + "PP"};
    EXPECT_EQ(decoded_as<HeadersFrame>(f).fragment, "block");
  }
  {
    // Padding may take all the room after the priority fields: an empty fragment.
    TestFrame f{FrameType::headers, kPadded | kPriority, 9, hex_bytes("02 00000001 ff") + "PP"};
    EXPECT_EQ(decoded_as<HeadersFrame>(f).fragment, "");
  }
}

TEST(Http2Decode, RefusesMalformedHeaders) {
  expect_connection_error(decode_error_of({FrameType::headers, kEndHeaders, 0, "b"}),
                          ErrorCode::protocol_error,
                          "HEADERS frame on stream 0: this type belongs to a stream, and stream 0 "
                          "is the connection");
  expect_connection_error(
      decode_error_of({FrameType::headers, kPriority, 1, hex_bytes("00000003")}),
      ErrorCode::frame_size_error,
      "HEADERS frame on stream 1: PRIORITY, but its payload of 4 bytes has no room for 5 bytes "
      "of priority fields");
  expect_connection_error(
      decode_error_of({FrameType::headers, kPadded | kPriority, 1, hex_bytes("00 00000003")}),
      ErrorCode::frame_size_error,
      "HEADERS frame on stream 1: PADDED, but its payload of 5 bytes has no room for the Pad "
      "Length and 5 bytes of priority fields");
  // Padding of 3 after the 6 bytes of Pad Length and priority fields leaves -1 for the fragment.
  expect_connection_error(
      decode_error_of(
          {FrameType::headers, kPadded | kPriority, 1, hex_bytes("03 00000003 10 aabb")}),
      ErrorCode::protocol_error,
      "HEADERS frame on stream 1: padding of 3 bytes does not fit in its 8-byte payload after the "
      "Pad Length and 5 bytes of priority fields");
  expect_connection_error(decode_error_of({FrameType::headers, kPadded, 1, hex_bytes("01")}),
                          ErrorCode::protocol_error,
                          "HEADERS frame on stream 1: padding of 1 bytes does not fit in its "
                          "1-byte payload after the Pad Length");
}

TEST(Http2Decode, Continuation) {
  TestFrame f{FrameType::continuation, kEndHeaders, 3, "more"};
  const auto c = decoded_as<ContinuationFrame>(f);
  EXPECT_EQ(c.stream_id, 3u);
  EXPECT_TRUE(c.end_headers);
  EXPECT_EQ(c.fragment, "more");
  // CONTINUATION defines no PADDED: the bit is ignored, the payload is the fragment.
  TestFrame padded{FrameType::continuation, kPadded, 3, hex_bytes("05") + "x"};
  EXPECT_EQ(decoded_as<ContinuationFrame>(padded).fragment, hex_bytes("05") + "x");
  EXPECT_FALSE(decoded_as<ContinuationFrame>(padded).end_headers);

  expect_connection_error(decode_error_of({FrameType::continuation, kEndHeaders, 0, "x"}),
                          ErrorCode::protocol_error,
                          "CONTINUATION frame on stream 0: this type belongs to a stream, and "
                          "stream 0 is the connection");
}

TEST(Http2Decode, RefusesPushPromise) {
  expect_connection_error(
      decode_error_of({FrameType::push_promise, kEndHeaders, 1, hex_bytes("00000002") + "block"}),
      ErrorCode::protocol_error,
      "PUSH_PROMISE frame on stream 1: server push is disabled (we sent SETTINGS_ENABLE_PUSH 0)");
}

// --- decoding: RST_STREAM, PRIORITY, unknown types -------------------------------------------

TEST(Http2Decode, RstStream) {
  TestFrame f{FrameType::rst_stream, 0, 5, hex_bytes("00000008")};
  const auto r = decoded_as<RstStreamFrame>(f);
  EXPECT_EQ(r.stream_id, 5u);
  EXPECT_EQ(r.error_code, ErrorCode::cancel);
  // An unknown code is kept as it is (it means no more than INTERNAL_ERROR, §7).
  TestFrame unknown{FrameType::rst_stream, 0, 5, hex_bytes("0000abcd")};
  EXPECT_EQ(decoded_as<RstStreamFrame>(unknown).error_code, static_cast<ErrorCode>(0xabcd));

  expect_connection_error(decode_error_of({FrameType::rst_stream, 0, 0, hex_bytes("00000008")}),
                          ErrorCode::protocol_error,
                          "RST_STREAM frame on stream 0: this type belongs to a stream, and "
                          "stream 0 is the connection");
  expect_connection_error(decode_error_of({FrameType::rst_stream, 0, 1, hex_bytes("000008")}),
                          ErrorCode::frame_size_error,
                          "RST_STREAM frame on stream 1: payload of 3 bytes (must be 4)");
  expect_connection_error(decode_error_of({FrameType::rst_stream, 0, 1, hex_bytes("0000000800")}),
                          ErrorCode::frame_size_error,
                          "RST_STREAM frame on stream 1: payload of 5 bytes (must be 4)");
}

TEST(Http2Decode, PriorityIsCheckedThenIgnored) {
  TestFrame f{FrameType::priority, 0, 3, hex_bytes("00000001 0f")};
  const auto p = decoded_as<IgnoredFrame>(f);
  EXPECT_EQ(p.type, FrameType::priority);
  EXPECT_EQ(p.stream_id, 3u);

  expect_connection_error(decode_error_of({FrameType::priority, 0, 0, hex_bytes("00000001 0f")}),
                          ErrorCode::protocol_error,
                          "PRIORITY frame on stream 0: this type belongs to a stream, and stream "
                          "0 is the connection");
  // A wrong length is a stream error (§6.3).
  const Http2Error e = decode_error_of({FrameType::priority, 0, 3, hex_bytes("00000001")});
  EXPECT_EQ(e.code, ErrorCode::frame_size_error);
  EXPECT_EQ(e.scope, ErrorScope::stream);
  EXPECT_EQ(e.stream_id, 3u);
  EXPECT_EQ(e.message, "PRIORITY frame on stream 3: payload of 4 bytes (must be 5)");
  EXPECT_EQ(decode_error_of({FrameType::priority, 0, 3, hex_bytes("00000001 0f 00")}).message,
            "PRIORITY frame on stream 3: payload of 6 bytes (must be 5)");
}

TEST(Http2Decode, UnknownTypesAreIgnoredWhateverTheyHold) {
  for (int type : {0xa, 0xc, 0x10, 0xff}) {
    for (std::uint32_t stream : {0u, 1u, 0x7fffffffu}) {
      TestFrame f{static_cast<FrameType>(type), 0xff, stream, std::string(type, 'z')};
      const auto i = decoded_as<IgnoredFrame>(f);
      EXPECT_EQ(i.type, static_cast<FrameType>(type));
      EXPECT_EQ(i.stream_id, stream);
    }
  }
}

// --- decoding: SETTINGS ----------------------------------------------------------------------

TEST(Http2Decode, SettingsAckAndEmpty) {
  TestFrame ack{FrameType::settings, kAck, 0, ""};
  const auto a = decoded_as<SettingsFrame>(ack);
  EXPECT_TRUE(a.ack);
  EXPECT_TRUE(a.settings.empty());
  TestFrame empty{FrameType::settings, 0, 0, ""};
  const auto e = decoded_as<SettingsFrame>(empty);
  EXPECT_FALSE(e.ack);
  EXPECT_TRUE(e.settings.empty());
  // The largest and smallest values where any 32-bit value goes, and the edges of the ranges.
  TestFrame edges{FrameType::settings, 0, 0,
                  hex_bytes("0001 ffffffff 0003 00000000 0006 ffffffff 0004 00000000 "
                            "0005 00004000 0005 00ffffff 0002 00000000")};
  EXPECT_EQ(decoded_as<SettingsFrame>(edges).settings.size(), 7u);
}

TEST(Http2Decode, RefusesMalformedSettings) {
  expect_connection_error(decode_error_of({FrameType::settings, 0, 1, ""}),
                          ErrorCode::protocol_error,
                          "SETTINGS frame on stream 1: this type belongs to the connection "
                          "(stream 0), not to a stream");
  expect_connection_error(
      decode_error_of({FrameType::settings, kAck, 0, hex_bytes("0002 00000000")}),
      ErrorCode::frame_size_error,
      "SETTINGS frame on stream 0: ACK with a payload of 6 bytes (an ACK is "
      "empty)");
  expect_connection_error(
      decode_error_of({FrameType::settings, 0, 0, hex_bytes("0002 00000000 00")}),
      ErrorCode::frame_size_error,
      "SETTINGS frame on stream 0: payload of 7 bytes is not a whole number of 6-byte "
      "parameters");
  expect_connection_error(decode_error_of({FrameType::settings, 0, 0, hex_bytes("0002 0000")}),
                          ErrorCode::frame_size_error,
                          "SETTINGS frame on stream 0: payload of 4 bytes is not a whole number "
                          "of 6-byte parameters");
}

TEST(Http2Decode, RefusesSettingsValuesOutOfRange) {
  struct Case {
    std::string_view hex;
    ErrorCode code;
    std::string_view message;
  };
  for (const Case& c : {
           Case{"0002 00000002", ErrorCode::protocol_error,
                "SETTINGS_ENABLE_PUSH of 2 (must be 0 or 1)"},
           Case{"0002 00000001", ErrorCode::protocol_error,
                "SETTINGS_ENABLE_PUSH of 1 (a server may only send 0: it cannot receive pushes)"},
           Case{"0004 80000000", ErrorCode::flow_control_error,
                "SETTINGS_INITIAL_WINDOW_SIZE of 2147483648 is above 2^31 - 1, the largest "
                "flow-control window"},
           Case{"0004 ffffffff", ErrorCode::flow_control_error,
                "SETTINGS_INITIAL_WINDOW_SIZE of 4294967295 is above 2^31 - 1, the largest "
                "flow-control window"},
           Case{"0005 00003fff", ErrorCode::protocol_error,
                "SETTINGS_MAX_FRAME_SIZE of 16383 is outside 16384 to 16777215 (2^14 to 2^24 - 1)"},
           Case{"0005 01000000", ErrorCode::protocol_error,
                "SETTINGS_MAX_FRAME_SIZE of 16777216 is outside 16384 to 16777215 (2^14 to 2^24 "
                "- 1)"},
           Case{"0005 00000000", ErrorCode::protocol_error,
                "SETTINGS_MAX_FRAME_SIZE of 0 is outside 16384 to 16777215 (2^14 to 2^24 - 1)"},
       }) {
    // After a valid parameter, to show the frame is refused whole.
    const Http2Error e =
        decode_error_of({FrameType::settings, 0, 0, hex_bytes("0003 00000064") + hex_bytes(c.hex)});
    expect_connection_error(e, c.code, "SETTINGS frame on stream 0: " + std::string(c.message));
  }
  // An unknown parameter is not checked, whatever its value.
  TestFrame unknown{FrameType::settings, 0, 0,
                    hex_bytes("0000 ffffffff 0007 ffffffff ffff 00000000")};
  EXPECT_TRUE(decoded_as<SettingsFrame>(unknown).settings.empty());
}

// --- decoding: PING, GOAWAY, WINDOW_UPDATE ---------------------------------------------------

TEST(Http2Decode, Ping) {
  TestFrame f{FrameType::ping, 0, 0, hex_bytes("0102030405060708")};
  const auto p = decoded_as<PingFrame>(f);
  EXPECT_FALSE(p.ack);
  EXPECT_EQ(p.opaque, (PingData{1, 2, 3, 4, 5, 6, 7, 8}));
  TestFrame ack{FrameType::ping, kAck, 0, hex_bytes("ffffffffffffffff")};
  EXPECT_TRUE(decoded_as<PingFrame>(ack).ack);

  expect_connection_error(decode_error_of({FrameType::ping, 0, 1, hex_bytes("0102030405060708")}),
                          ErrorCode::protocol_error,
                          "PING frame on stream 1: this type belongs to the connection (stream "
                          "0), not to a stream");
  expect_connection_error(decode_error_of({FrameType::ping, 0, 0, hex_bytes("01020304050607")}),
                          ErrorCode::frame_size_error,
                          "PING frame on stream 0: payload of 7 bytes (must be 8)");
  expect_connection_error(
      decode_error_of({FrameType::ping, kAck, 0, hex_bytes("010203040506070809")}),
      ErrorCode::frame_size_error, "PING frame on stream 0: payload of 9 bytes (must be 8)");
}

TEST(Http2Decode, Goaway) {
  // The reserved bit of the last stream id is ignored; an unknown code is kept.
  TestFrame f{FrameType::goaway, 0, 0, hex_bytes("80000005 0000000b") + "slow down"};
  const auto g = decoded_as<GoawayFrame>(f);
  EXPECT_EQ(g.last_stream_id, 5u);
  EXPECT_EQ(g.error_code, ErrorCode::enhance_your_calm);
  EXPECT_EQ(g.debug_data, "slow down");
  TestFrame bare{FrameType::goaway, 0, 0, hex_bytes("7fffffff 00001234")};
  const auto b = decoded_as<GoawayFrame>(bare);
  EXPECT_EQ(b.last_stream_id, 0x7fffffffu);
  EXPECT_EQ(b.error_code, static_cast<ErrorCode>(0x1234));
  EXPECT_EQ(b.debug_data, "");

  expect_connection_error(
      decode_error_of({FrameType::goaway, 0, 3, hex_bytes("00000001 00000000")}),
      ErrorCode::protocol_error,
      "GOAWAY frame on stream 3: this type belongs to the connection (stream "
      "0), not to a stream");
  expect_connection_error(decode_error_of({FrameType::goaway, 0, 0, hex_bytes("00000001 000000")}),
                          ErrorCode::frame_size_error,
                          "GOAWAY frame on stream 0: payload of 7 bytes is too short for its "
                          "last stream id and error code (8 bytes)");
}

TEST(Http2Decode, WindowUpdate) {
  TestFrame conn{FrameType::window_update, 0, 0, hex_bytes("00010000")};
  const auto c = decoded_as<WindowUpdateFrame>(conn);
  EXPECT_EQ(c.stream_id, 0u);
  EXPECT_EQ(c.increment, 65536u);
  // The reserved bit is ignored.
  TestFrame stream{FrameType::window_update, 0, 9, hex_bytes("ffffffff")};
  const auto s = decoded_as<WindowUpdateFrame>(stream);
  EXPECT_EQ(s.stream_id, 9u);
  EXPECT_EQ(s.increment, 0x7fffffffu);
}

TEST(Http2Decode, RefusesAWindowUpdateOfZeroOnTheStreamOrConnection) {
  // On a stream: a stream error on that stream.
  const Http2Error e = decode_error_of({FrameType::window_update, 0, 9, hex_bytes("00000000")});
  EXPECT_EQ(e.code, ErrorCode::protocol_error);
  EXPECT_EQ(e.scope, ErrorScope::stream);
  EXPECT_EQ(e.stream_id, 9u);
  EXPECT_EQ(e.message, "WINDOW_UPDATE frame on stream 9: window size increment of 0");
  // Only the reserved bit set is 0 too.
  EXPECT_EQ(decode_error_of({FrameType::window_update, 0, 9, hex_bytes("80000000")}).scope,
            ErrorScope::stream);
  // On the connection: a connection error.
  expect_connection_error(decode_error_of({FrameType::window_update, 0, 0, hex_bytes("00000000")}),
                          ErrorCode::protocol_error,
                          "WINDOW_UPDATE frame on stream 0: window size increment of 0");
  // A wrong length is a connection error, even on a stream.
  expect_connection_error(decode_error_of({FrameType::window_update, 0, 9, hex_bytes("000001")}),
                          ErrorCode::frame_size_error,
                          "WINDOW_UPDATE frame on stream 9: payload of 3 bytes (must be 4)");
}

TEST(Http2Decode, ErrorsConvertToErrorsForTheLayersAbove) {
  const Error conn =
      Http2Error::connection(ErrorCode::protocol_error, "DATA frame on stream 0: why").to_error();
  EXPECT_EQ(conn.code, Errc::decode);
  EXPECT_EQ(conn.message, "HTTP/2 connection error PROTOCOL_ERROR: DATA frame on stream 0: why");
  const Error stream = Http2Error::stream(ErrorCode::frame_size_error, 3, "what").to_error();
  EXPECT_EQ(stream.message, "HTTP/2 stream error on stream 3 FRAME_SIZE_ERROR: what");
}

// --- header blocks ---------------------------------------------------------------------------

// Feeds a frame to `a` as the transport does: its header, then the frame decoded, which must
// decode. Both calls check the sequence rule: they must agree.
Http2Result<std::optional<HeaderBlock>> feed_assembler(HeaderBlockAssembler& a,
                                                       const TestFrame& f) {
  const auto checked = a.check_sequence(f.header());
  auto d = decode_frame(f.frame());
  EXPECT_TRUE(d) << d.error().message;
  if (!d) return std::move(d).error();
  auto r = a.on_frame(*d);
  if (!checked) {
    EXPECT_FALSE(r);
    if (r) return checked.error();
    EXPECT_EQ(r.error().message, checked.error().message);
    EXPECT_EQ(r.error().code, checked.error().code);
  }
  return r;
}

TEST(Http2HeaderBlock, OneHeadersFrameIsABlock) {
  HeaderBlockAssembler a;
  auto r = feed_assembler(a, {FrameType::headers, kEndHeaders | kEndStream, 1, "block"});
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_TRUE(*r);
  EXPECT_EQ((*r)->stream_id, 1u);
  EXPECT_TRUE((*r)->end_stream);
  EXPECT_EQ((*r)->block, "block");
  EXPECT_FALSE(a.in_block());
}

TEST(Http2HeaderBlock, JoinsContinuationsAndLetsOtherFramesPassBetweenBlocks) {
  HeaderBlockAssembler a;
  // Frames other than HEADERS and CONTINUATION outside a block: nothing to join, no error.
  for (const TestFrame& f :
       {TestFrame{FrameType::data, 0, 1, "d"}, TestFrame{FrameType::settings, kAck, 0, ""},
        TestFrame{FrameType::ping, 0, 0, std::string(8, 'p')},
        TestFrame{FrameType::priority, 0, 1, std::string(5, '\0')},
        TestFrame{static_cast<FrameType>(0xb), 0, 0, "ext"}}) {
    auto r = feed_assembler(a, f);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_FALSE(*r);
  }
  auto r =
      feed_assembler(a, {FrameType::headers, kEndStream | kPadded, 3, hex_bytes("01") + "one,x"});
  ASSERT_TRUE(r && !*r);
  EXPECT_TRUE(a.in_block());
  r = feed_assembler(a, {FrameType::continuation, 0, 3, "two,"});
  ASSERT_TRUE(r && !*r);
  r = feed_assembler(a, {FrameType::continuation, 0, 3, ""});
  ASSERT_TRUE(r && !*r);
  r = feed_assembler(a, {FrameType::continuation, kEndHeaders, 3, "three"});
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_TRUE(*r);
  EXPECT_EQ((*r)->stream_id, 3u);
  EXPECT_TRUE((*r)->end_stream);  // the HEADERS frame's, for the whole block
  EXPECT_EQ((*r)->block, "one,two,three");
  EXPECT_FALSE(a.in_block());

  // And the next block, on another stream, starts afresh.
  r = feed_assembler(a, {FrameType::headers, 0, 5, "a"});
  ASSERT_TRUE(r && !*r);
  r = feed_assembler(a, {FrameType::continuation, kEndHeaders, 5, "b"});
  ASSERT_TRUE(r && *r);
  EXPECT_EQ((*r)->stream_id, 5u);
  EXPECT_FALSE((*r)->end_stream);
  EXPECT_EQ((*r)->block, "ab");
}

TEST(Http2HeaderBlock, RefusesAContinuationOutsideABlock) {
  HeaderBlockAssembler a;
  auto r = feed_assembler(a, {FrameType::continuation, kEndHeaders, 1, "x"});
  ASSERT_FALSE(r);
  expect_connection_error(r.error(), ErrorCode::protocol_error,
                          "CONTINUATION frame on stream 1 outside a header block (it may only "
                          "follow a HEADERS or CONTINUATION frame without END_HEADERS)");
  // After a block has ended, too.
  HeaderBlockAssembler b;
  ASSERT_TRUE(feed_assembler(b, {FrameType::headers, kEndHeaders, 1, "x"}));
  r = feed_assembler(b, {FrameType::continuation, kEndHeaders, 1, "y"});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::protocol_error);
  EXPECT_THAT(r.error().message, HasSubstr("outside a header block"));
}

TEST(Http2HeaderBlock, RefusesAnyOtherFrameInsideABlock) {
  struct Case {
    TestFrame frame;
    std::string message;
  };
  const std::string tail =
      " inside the header block of stream 1 (only its CONTINUATION frames may come until "
      "END_HEADERS)";
  const std::vector<Case> cases = {
      {{FrameType::continuation, kEndHeaders, 3, "x"},
       "CONTINUATION frame on stream 3 inside the header block of stream 1 (its CONTINUATION "
       "frames must be on its stream)"},
      {{FrameType::headers, kEndHeaders, 1, "x"}, "HEADERS frame on stream 1" + tail},
      {{FrameType::headers, kEndHeaders, 3, "x"}, "HEADERS frame on stream 3" + tail},
      {{FrameType::data, 0, 1, "x"}, "DATA frame on stream 1" + tail},
      {{FrameType::rst_stream, 0, 1, std::string(4, '\0')}, "RST_STREAM frame on stream 1" + tail},
      {{FrameType::settings, 0, 0, ""}, "SETTINGS frame on stream 0" + tail},
      {{FrameType::ping, 0, 0, std::string(8, 'p')}, "PING frame on stream 0" + tail},
      {{FrameType::goaway, 0, 0, std::string(8, '\0')}, "GOAWAY frame on stream 0" + tail},
      {{FrameType::window_update, 0, 0, hex_bytes("00000001")},
       "WINDOW_UPDATE frame on stream 0" + tail},
      {{FrameType::priority, 0, 1, std::string(5, '\0')}, "PRIORITY frame on stream 1" + tail},
      // An extension frame too (§5.5).
      {{static_cast<FrameType>(0xb), 0, 1, "ext"}, "frame type 0xb frame on stream 1" + tail},
  };
  for (const Case& c : cases) {
    HeaderBlockAssembler a;
    ASSERT_TRUE(feed_assembler(a, {FrameType::headers, 0, 1, "x"}));
    ASSERT_TRUE(a.in_block());
    auto r = feed_assembler(a, c.frame);
    ASSERT_FALSE(r) << c.message;
    expect_connection_error(r.error(), ErrorCode::protocol_error, c.message);
  }
}

TEST(Http2HeaderBlock, RefusesInsideABlockAFrameThatDoesNotDecode) {
  // A PRIORITY frame of the wrong length is a stream error alone; inside a header block, the
  // header says enough for the connection error it is there.
  HeaderBlockAssembler a;
  ASSERT_TRUE(feed_assembler(a, {FrameType::headers, 0, 1, "x"}));
  const TestFrame priority{FrameType::priority, 0, 3, "abc"};
  EXPECT_EQ(decode_error_of(priority).scope, ErrorScope::stream);
  auto s = a.check_sequence(priority.header());
  ASSERT_FALSE(s);
  expect_connection_error(s.error(), ErrorCode::protocol_error,
                          "PRIORITY frame on stream 3 inside the header block of stream 1 (only "
                          "its CONTINUATION frames may come until END_HEADERS)");
  // What may come passes, and the check changes nothing.
  EXPECT_TRUE(a.check_sequence({0, FrameType::continuation, 0, 1}));
  EXPECT_TRUE(a.check_sequence({5, FrameType::continuation, kPadded, 1}));
  EXPECT_TRUE(a.in_block());
  auto r = feed_assembler(a, {FrameType::continuation, kEndHeaders, 1, "y"});
  ASSERT_TRUE(r && *r);
  EXPECT_EQ((*r)->block, "xy");
  // Outside a block, anything but a CONTINUATION passes, even what will not decode.
  EXPECT_TRUE(a.check_sequence(priority.header()));
  EXPECT_TRUE(a.check_sequence({0, FrameType::data, 0, 0}));
  EXPECT_FALSE(a.check_sequence({0, FrameType::continuation, kEndHeaders, 1}));
}

TEST(Http2HeaderBlock, BoundsABlockByItsFragmentsAndNineBytesAFrame) {
  {
    // 100 bytes: HEADERS of 41 (9 + 41 = 50) and CONTINUATION of 41: exactly the bound.
    HeaderBlockAssembler a(100);
    ASSERT_TRUE(feed_assembler(a, {FrameType::headers, 0, 1, std::string(41, 'a')}));
    auto r = feed_assembler(a, {FrameType::continuation, kEndHeaders, 1, std::string(41, 'b')});
    ASSERT_TRUE(r && *r);
    EXPECT_EQ((*r)->block.size(), 82u);
  }
  {
    // One more byte is past it.
    HeaderBlockAssembler a(100);
    ASSERT_TRUE(feed_assembler(a, {FrameType::headers, 0, 1, std::string(41, 'a')}));
    auto r = feed_assembler(a, {FrameType::continuation, kEndHeaders, 1, std::string(42, 'b')});
    ASSERT_FALSE(r);
    expect_connection_error(r.error(), ErrorCode::enhance_your_calm,
                            "header block on stream 1 is larger than 100 bytes (max_block_size, "
                            "counting its fragments and 9 bytes per frame)");
  }
  {
    // A single HEADERS frame past it.
    HeaderBlockAssembler a(100);
    auto r = feed_assembler(a, {FrameType::headers, kEndHeaders, 1, std::string(92, 'a')});
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::enhance_your_calm);
  }
  {
    // Empty CONTINUATION frames count too: the default bound ends a flood of them.
    HeaderBlockAssembler a;
    ASSERT_TRUE(feed_assembler(a, {FrameType::headers, 0, 1, ""}));
    const std::size_t fit = HeaderBlockAssembler::kDefaultMaxBlockSize / 9 - 1;
    for (std::size_t i = 0; i < fit; ++i) {
      ASSERT_TRUE(feed_assembler(a, {FrameType::continuation, 0, 1, ""})) << i;
    }
    auto r = feed_assembler(a, {FrameType::continuation, 0, 1, ""});
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::enhance_your_calm);
    EXPECT_THAT(r.error().message, HasSubstr("larger than 262144 bytes"));
  }
}

// --- writers, read back ----------------------------------------------------------------------

TEST(Http2Writers, ClientPrefaceAndSettings) {
  std::string out;
  append_client_preface(out, ClientSettings{});
  EXPECT_EQ(out, std::string(detail::kClientPreface) +
                     hex_bytes("000018 04 00 00000000"  // SETTINGS, 4 parameters
                               "0002 00000000"          // ENABLE_PUSH 0
                               "0004 0000ffff"          // INITIAL_WINDOW_SIZE 65535
                               "0005 00004000"          // MAX_FRAME_SIZE 16384
                               "0006 00040000"));       // MAX_HEADER_LIST_SIZE 262144

  out.clear();
  append_client_preface(out, ClientSettings{0x7fffffff, 0xffffff, 1024});
  ASSERT_EQ(out.substr(0, 24), detail::kClientPreface);
  TestFrame keep;
  const auto s = read_one_as<SettingsFrame>(std::string_view(out).substr(24), keep);
  EXPECT_FALSE(s.ack);
  EXPECT_EQ(s.settings, (std::vector<Setting>{{SettingId::enable_push, 0},
                                              {SettingId::initial_window_size, 0x7fffffff},
                                              {SettingId::max_frame_size, 0xffffff},
                                              {SettingId::max_header_list_size, 1024}}));
}

TEST(Http2Writers, SettingsAckAndPing) {
  std::string out;
  append_settings_ack(out);
  EXPECT_EQ(out, hex_bytes("000000 04 01 00000000"));
  TestFrame keep;
  EXPECT_TRUE(read_one_as<SettingsFrame>(out, keep).ack);

  const PingData opaque{0xde, 0xad, 0xbe, 0xef, 0, 1, 2, 0xff};
  out.clear();
  append_ping(out, opaque, true);
  EXPECT_EQ(out, hex_bytes("000008 06 01 00000000 deadbeef000102ff"));
  auto p = read_one_as<PingFrame>(out, keep);
  EXPECT_TRUE(p.ack);
  EXPECT_EQ(p.opaque, opaque);
  out.clear();
  append_ping(out, opaque, false);
  p = read_one_as<PingFrame>(out, keep);
  EXPECT_FALSE(p.ack);
  EXPECT_EQ(p.opaque, opaque);
}

TEST(Http2Writers, WindowUpdateRstStreamAndGoaway) {
  std::string out;
  append_window_update(out, 0, 0x7fffffff);
  EXPECT_EQ(out, hex_bytes("000004 08 00 00000000 7fffffff"));
  TestFrame keep;
  auto w = read_one_as<WindowUpdateFrame>(out, keep);
  EXPECT_EQ(w.stream_id, 0u);
  EXPECT_EQ(w.increment, 0x7fffffffu);
  out.clear();
  append_window_update(out, 0x7fffffff, 1);
  w = read_one_as<WindowUpdateFrame>(out, keep);
  EXPECT_EQ(w.stream_id, 0x7fffffffu);
  EXPECT_EQ(w.increment, 1u);

  out.clear();
  append_rst_stream(out, 7, ErrorCode::cancel);
  EXPECT_EQ(out, hex_bytes("000004 03 00 00000007 00000008"));
  const auto r = read_one_as<RstStreamFrame>(out, keep);
  EXPECT_EQ(r.stream_id, 7u);
  EXPECT_EQ(r.error_code, ErrorCode::cancel);

  out.clear();
  append_goaway(out, 5, ErrorCode::protocol_error, "bad");
  EXPECT_EQ(out, hex_bytes("00000b 07 00 00000000 00000005 00000001 626164"));
  auto g = read_one_as<GoawayFrame>(out, keep);
  EXPECT_EQ(g.last_stream_id, 5u);
  EXPECT_EQ(g.error_code, ErrorCode::protocol_error);
  EXPECT_EQ(g.debug_data, "bad");

  // Debug data is cut to fit the smallest frame size a server may take.
  out.clear();
  append_goaway(out, 0, ErrorCode::no_error, std::string(20000, 'x'));
  g = read_one_as<GoawayFrame>(out, keep);
  EXPECT_EQ(keep.payload.size(), 16384u);
  EXPECT_EQ(g.debug_data, std::string(16376, 'x'));
}

// Reads `wire` back and checks its frames: their types, lengths and flags.
void expect_frames(std::string_view wire,
                   const std::vector<std::tuple<FrameType, std::uint32_t, std::uint8_t>>& want,
                   std::uint32_t max_frame_size = detail::kDefaultMaxFrameSize) {
  const auto frames = read_frames(wire, max_frame_size);
  ASSERT_EQ(frames.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(frames[i].header.type, std::get<0>(want[i]));
    EXPECT_EQ(frames[i].header.length, std::get<1>(want[i]));
    EXPECT_EQ(frames[i].header.flags, std::get<2>(want[i]));
  }
}

TEST(Http2Writers, HeadersSplitIntoContinuationsByThePeersMaxFrameSize) {
  std::string block;
  for (int i = 0; i < 40000; ++i) block.push_back(static_cast<char>(i * 7));
  std::string out;
  append_headers(out, 1, block, true, 16384);
  expect_frames(out, {{FrameType::headers, 16384, kEndStream},
                      {FrameType::continuation, 16384, 0},
                      {FrameType::continuation, 7232, kEndHeaders}});
  // Read and joined, it is the block again.
  {
    FrameReader reader;
    HeaderBlockAssembler a;
    std::string_view in = out;
    std::optional<HeaderBlock> got;
    while (true) {
      auto f = reader.read(in);
      ASSERT_TRUE(f && (*f || got));
      if (!*f) break;
      auto d = decode_frame(**f);
      ASSERT_TRUE(d) << d.error().message;
      auto b = a.on_frame(*d);
      ASSERT_TRUE(b) << b.error().message;
      if (*b) got = std::move(**b);
    }
    ASSERT_TRUE(got);
    EXPECT_EQ(got->stream_id, 1u);
    EXPECT_TRUE(got->end_stream);
    EXPECT_EQ(got->block, block);
  }

  out.clear();
  append_headers(out, 3, std::string_view(block).substr(0, 32768), false, 16384);  // a multiple
  expect_frames(out,
                {{FrameType::headers, 16384, 0}, {FrameType::continuation, 16384, kEndHeaders}});
  out.clear();
  append_headers(out, 3, std::string_view(block).substr(0, 16384), false, 16384);
  expect_frames(out, {{FrameType::headers, 16384, kEndHeaders}});
  out.clear();
  append_headers(out, 5, "", true, 16384);  // an empty block is still a frame
  EXPECT_EQ(out, hex_bytes("000000 01 05 00000005"));
}

TEST(Http2Writers, ARequestsHeadersThroughFramesAndHpack) {
  const std::vector<detail::HeaderField> request = {
      {":method", "GET"},
      {":scheme", "https"},
      {":authority", "10.0.0.1:6443"},
      {":path", "/api/v1/namespaces/default/pods?watch=true&" + std::string(300, 'q')},
      {"authorization", "Bearer " + std::string(1000, 't')}};
  std::string out;
  // A max frame size below any a server may set (16384 at least), for many CONTINUATIONs.
  append_headers(out, 1, detail::hpack_encode_request(request), true, 100);
  const auto frames = read_frames(out);
  ASSERT_GT(frames.size(), 10u);
  HeaderBlockAssembler a;
  std::optional<HeaderBlock> got;
  for (const ReadFrame& f : frames) {
    ASSERT_FALSE(got) << "a frame after the block ended";
    auto d = decode_frame({f.header, f.payload});
    ASSERT_TRUE(d) << d.error().message;
    auto b = a.on_frame(*d);
    ASSERT_TRUE(b) << b.error().message;
    if (*b) got = std::move(**b);
  }
  ASSERT_TRUE(got);
  detail::HpackDecoder hpack;
  auto fields = hpack.decode(got->block);
  ASSERT_TRUE(fields) << fields.error().to_string();
  EXPECT_EQ(*fields, request);
}

TEST(Http2Writers, DataSplitByThePeersMaxFrameSize) {
  std::string data;
  for (int i = 0; i < 40000; ++i) data.push_back(static_cast<char>(i * 13));
  std::string out;
  append_data(out, 1, data, true, 16384);
  expect_frames(out, {{FrameType::data, 16384, 0},
                      {FrameType::data, 16384, 0},
                      {FrameType::data, 7232, kEndStream}});
  std::string joined;
  std::uint32_t flow_controlled = 0;
  for (const ReadFrame& f : read_frames(out)) {
    TestFrame keep{f.header.type, f.header.flags, f.header.stream_id, f.payload};
    const auto d = decoded_as<DataFrame>(keep);
    EXPECT_EQ(d.stream_id, 1u);
    joined += d.data;
    flow_controlled += d.flow_controlled_size;
  }
  EXPECT_EQ(joined, data);
  EXPECT_EQ(flow_controlled, 40000u);

  out.clear();
  append_data(out, 1, data, false, 65535);  // a larger peer max: one frame
  expect_frames(out, {{FrameType::data, 40000, 0}}, 65535);
  out.clear();
  append_data(out, 1, std::string_view(data).substr(0, 32768), true, 16384);  // a multiple
  expect_frames(out, {{FrameType::data, 16384, 0}, {FrameType::data, 16384, kEndStream}});
  out.clear();
  append_data(out, 3, "", true, 16384);  // the end of a stream alone
  EXPECT_EQ(out, hex_bytes("000000 00 01 00000003"));
  out.clear();
  append_data(out, 3, "", false, 16384);  // nothing to say
  EXPECT_EQ(out, "");
}

TEST(Http2Writers, AppendToWhatIsThere) {
  std::string out = "x";
  append_settings_ack(out);
  append_window_update(out, 0, 1);
  EXPECT_EQ(out, "x" + hex_bytes("000000 04 01 00000000 000004 08 00 00000000 00000001"));
}

}  // namespace
}  // namespace kinformer::client
