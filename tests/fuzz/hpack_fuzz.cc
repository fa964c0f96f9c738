// libFuzzer target: the HTTP/2 client's input side. The HPACK decoder (client/src/http2/hpack.h)
// is fed one connection's header blocks in a row, so that the dynamic table carries from one to
// the next; the framing layer (client/src/http2/frame.h) is fed the same bytes as what a server
// sends, through the reader, the frame decoder and the header block assembler into HPACK.
// Input: byte 0 picks max_header_list_size (b % 4: 256 KiB, 4 KiB, 100, 0; also the header
// block bound), the table size the connection starts with (b / 4 % 4: 4096, 256, 0, 65536) and
// our SETTINGS_MAX_FRAME_SIZE (b / 16 % 4: 16384, 20000, 65535, 2^24 - 1); byte 1 picks a limit
// set before the second block (b % 5: none, 0, 100, 4096, 65536) and the frame size header blocks
// are written back with (b / 8 % 4: 1, 7, 100, 16384); byte 2 (% 8) is the number of cuts, each
// two bytes (little-endian, modulo the rest's size + 1); the rest, cut there, is the blocks, and
// as frames, is read in the pieces the cuts make.
// Seeds: tests/fuzz/corpus/hpack_fuzz/ (RFC 7541 Appendix C's sequences, and frames-*: a
// server's frames, with this header).
// Checked beyond "no crash", for HPACK:
//  - a decoded list counts at most max_header_list_size (name + value + 32 per field); the table
//    holds what table_size() says and no more than table_capacity(), itself within the limit;
//  - an error is Errc::decode or Errc::too_large, its message "HPACK: ... (at byte N)" with N
//    within the block; the decoder is failed() from then on and the next block says so;
//  - every decoded list, encoded by hpack_encode_request, decodes to itself (names lower-cased)
//    and leaves the table empty; every value, Huffman-coded, decodes to itself;
//  - an integer read from the input at any prefix re-encodes to at most the bytes it took, and
//    back to itself.
// For framing:
//  - the reader hands out the same frames and the same error whether the bytes come whole, in
//    the cuts' pieces or (up to 4 KiB) byte by byte; no frame is longer than max_frame_size, and
//    the reader never holds more than 9 + max_frame_size bytes;
//  - a decoding error names its frame ("TYPE frame on stream N: ..."); a stream error is on the
//    frame's stream, not 0, and only for PRIORITY or WINDOW_UPDATE; every decoded field is
//    within RFC 9113's ranges, and DATA, RST_STREAM, PING, GOAWAY and WINDOW_UPDATE written
//    back by the writers decode to the same;
//  - the assembler's errors are connection errors, on_frame's only for the bound once
//    check_sequence let the frame's header pass; a block is within its bound, and written back
//    as HEADERS + CONTINUATION, read and joined, is itself.
#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz_input.h"
#include "http2/frame.h"
#include "http2/hpack.h"

namespace {

using kinformer::client::Errc;
using kinformer::client::detail::HeaderField;
using kinformer::client::detail::hpack_decode_integer;
using kinformer::client::detail::hpack_encode_integer;
using kinformer::client::detail::hpack_encode_request;
using kinformer::client::detail::hpack_huffman_encode;
using kinformer::client::detail::HpackDecoder;
namespace h2 = kinformer::client::detail;

void check(bool ok) {
  if (!ok) std::abort();
}

std::size_t list_size(const std::vector<HeaderField>& fields) {
  std::size_t n = 0;
  for (const auto& f : fields) n += f.name.size() + f.value.size() + 32;
  return n;
}

std::string lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

void check_error(const kinformer::client::Error& e, std::size_t block_size) {
  check(e.code == Errc::decode || e.code == Errc::too_large);
  check(e.message.rfind("HPACK: ", 0) == 0);
  const std::size_t at = e.message.rfind(" (at byte ");
  check(at != std::string::npos && e.message.back() == ')');
  const std::size_t n = std::strtoull(e.message.c_str() + at + 10, nullptr, 10);
  check(n <= block_size);
}

void check_round_trips(const std::vector<HeaderField>& fields, std::size_t max_list) {
  HpackDecoder fresh(max_list);
  auto again = fresh.decode(hpack_encode_request(fields));
  check(again.ok());
  check(again->size() == fields.size());
  for (std::size_t i = 0; i < fields.size(); ++i) {
    check((*again)[i].name == lower(fields[i].name));
    check((*again)[i].value == fields[i].value);
  }
  check(fresh.table_size() == 0);

  for (const auto& f : fields) {
    if (f.value.size() > 4096) continue;
    std::string block(1, '\0');  // literal without indexing, new name ("v"), Huffman value
    hpack_encode_integer(block, 0x00, 7, 1);
    block += 'v';
    const std::string coded = hpack_huffman_encode(f.value);
    check(coded.size() <= (f.value.size() * 30 + 7) / 8);
    hpack_encode_integer(block, 0x80, 7, coded.size());
    block += coded;
    HpackDecoder d;
    auto r = d.decode(block);
    check(r.ok() && r->size() == 1 && (*r)[0].value == f.value);
  }
}

void check_integers(std::string_view in) {
  for (int prefix = 1; prefix <= 8; ++prefix) {
    std::size_t pos = 0;
    auto v = hpack_decode_integer(in, pos, prefix);
    if (!v) continue;
    std::string out;
    hpack_encode_integer(out, 0, prefix, *v);
    check(out.size() <= pos);
    std::size_t back_pos = 0;
    auto back = hpack_decode_integer(out, back_pos, prefix);
    check(back.ok() && *back == *v && back_pos == out.size());
  }
}

// --- framing ---------------------------------------------------------------------------------

// What the reader made of the bytes: the frames (payloads copied) and, if it failed, the error.
struct ReadOutcome {
  std::vector<std::pair<h2::FrameHeader, std::string>> frames;
  std::string error;
  std::size_t left = 0;  // buffered at the end: a frame cut short
  bool operator==(const ReadOutcome&) const = default;
};

// Reads `wire` in pieces ending at `ends` (ascending, the last wire.size()).
ReadOutcome read_pieces(std::string_view wire, const std::vector<std::size_t>& ends,
                        std::uint32_t max_frame_size) {
  ReadOutcome out;
  h2::FrameReader reader(max_frame_size);
  std::size_t at = 0;
  for (std::size_t end : ends) {
    std::string_view in = wire.substr(at, end - at);
    at = end;
    while (true) {
      auto r = reader.read(in);
      check(reader.buffered() <= h2::kFrameHeaderSize + max_frame_size);
      if (!r) {
        check(reader.failed());
        check(r.error().code == h2::ErrorCode::frame_size_error);
        check(r.error().scope == h2::ErrorScope::connection);
        out.error = r.error().message;
        return out;
      }
      if (!*r) break;
      const h2::Frame& f = **r;
      check(f.header.length <= max_frame_size && f.payload.size() == f.header.length);
      out.frames.emplace_back(f.header, std::string(f.payload));
    }
    check(in.empty());
  }
  out.left = reader.buffered();
  return out;
}

std::string frame_name(const h2::FrameHeader& h) {
  return h2::frame_type_name(h.type) + " frame on stream " + std::to_string(h.stream_id);
}

bool within(std::string_view inner, std::string_view outer) {
  return inner.empty() || (inner.data() >= outer.data() &&
                           inner.data() + inner.size() <= outer.data() + outer.size());
}

// Reads back what a writer wrote: one frame (or several, for DATA), decoded.
std::vector<h2::DecodedFrame> read_back(const std::string& wire, std::vector<std::string>& keep,
                                        std::uint32_t max_frame_size = h2::kMaxFrameSizeLimit) {
  const ReadOutcome o = read_pieces(wire, {wire.size()}, max_frame_size);
  check(o.error.empty() && o.left == 0);
  std::vector<h2::DecodedFrame> out;
  keep.clear();
  keep.reserve(o.frames.size());
  for (const auto& [header, payload] : o.frames) {
    keep.push_back(payload);
    auto d = h2::decode_frame({header, keep.back()});
    check(d.ok());
    out.push_back(*d);
  }
  return out;
}

// The checks and round trips of one decoded frame.
void check_decoded(const h2::FrameHeader& h, std::string_view payload,
                   const h2::DecodedFrame& frame, std::uint32_t max_frame_size) {
  std::string wire;
  std::vector<std::string> keep;
  if (const auto* d = std::get_if<h2::DataFrame>(&frame)) {
    check(d->stream_id == h.stream_id && d->stream_id != 0 && within(d->data, payload));
    check(d->flow_controlled_size == h.length);
    h2::append_data(wire, d->stream_id, d->data, d->end_stream, max_frame_size);
    std::string joined;
    bool end_stream = false;
    for (const auto& back : read_back(wire, keep)) {
      const auto& b = std::get<h2::DataFrame>(back);
      check(b.stream_id == d->stream_id && !end_stream);
      joined += b.data;
      end_stream = b.end_stream;
    }
    check(joined == d->data && end_stream == d->end_stream);
  } else if (const auto* hf = std::get_if<h2::HeadersFrame>(&frame)) {
    check(hf->stream_id == h.stream_id && hf->stream_id != 0 && within(hf->fragment, payload));
  } else if (const auto* c = std::get_if<h2::ContinuationFrame>(&frame)) {
    check(c->stream_id == h.stream_id && c->stream_id != 0 && c->fragment == payload);
  } else if (const auto* r = std::get_if<h2::RstStreamFrame>(&frame)) {
    check(r->stream_id != 0 && h.length == 4);
    h2::append_rst_stream(wire, r->stream_id, r->error_code);
    const auto back = std::get<h2::RstStreamFrame>(read_back(wire, keep).at(0));
    check(back.stream_id == r->stream_id && back.error_code == r->error_code);
  } else if (const auto* s = std::get_if<h2::SettingsFrame>(&frame)) {
    check(h.stream_id == 0 && (!s->ack || (h.length == 0 && s->settings.empty())));
    h2::PeerSettings peer;
    peer.apply(*s);
    check(peer.initial_window_size <= h2::kMaxWindowSize);
    check(peer.max_frame_size >= h2::kDefaultMaxFrameSize &&
          peer.max_frame_size <= h2::kMaxFrameSizeLimit);
    for (const auto& setting : s->settings) {
      check(setting.id != h2::SettingId::enable_push || setting.value == 0);
    }
  } else if (const auto* p = std::get_if<h2::PingFrame>(&frame)) {
    check(h.stream_id == 0 && h.length == 8);
    h2::append_ping(wire, p->opaque, p->ack);
    const auto back = std::get<h2::PingFrame>(read_back(wire, keep).at(0));
    check(back.ack == p->ack && back.opaque == p->opaque);
  } else if (const auto* g = std::get_if<h2::GoawayFrame>(&frame)) {
    check(h.stream_id == 0 && g->last_stream_id <= h2::kMaxStreamId);
    check(within(g->debug_data, payload) && g->debug_data.size() + 8 == h.length);
    h2::append_goaway(wire, g->last_stream_id, g->error_code, g->debug_data);
    const auto back = std::get<h2::GoawayFrame>(read_back(wire, keep).at(0));
    check(back.last_stream_id == g->last_stream_id && back.error_code == g->error_code);
    check(back.debug_data == g->debug_data.substr(0, h2::kDefaultMaxFrameSize - 8));
  } else if (const auto* w = std::get_if<h2::WindowUpdateFrame>(&frame)) {
    check(w->stream_id == h.stream_id && w->increment >= 1 && w->increment <= h2::kMaxWindowSize);
    h2::append_window_update(wire, w->stream_id, w->increment);
    const auto back = std::get<h2::WindowUpdateFrame>(read_back(wire, keep).at(0));
    check(back.stream_id == w->stream_id && back.increment == w->increment);
  } else {
    const auto& i = std::get<h2::IgnoredFrame>(frame);
    check(i.type == h.type && i.stream_id == h.stream_id);
    check(h.type == h2::FrameType::priority ||
          static_cast<std::uint8_t>(h.type) >
              static_cast<std::uint8_t>(h2::FrameType::continuation));
  }
}

void check_decode_error(const h2::FrameHeader& h, const h2::Http2Error& e) {
  check(e.message.rfind(frame_name(h) + ": ", 0) == 0);
  if (e.scope == h2::ErrorScope::stream) {
    check(e.stream_id == h.stream_id && e.stream_id != 0);
    check(h.type == h2::FrameType::priority || h.type == h2::FrameType::window_update);
  } else {
    check(e.stream_id == 0);
  }
  check(e.code == h2::ErrorCode::protocol_error || e.code == h2::ErrorCode::frame_size_error ||
        e.code == h2::ErrorCode::flow_control_error);
}

// A whole block written back as HEADERS + CONTINUATION frames of at most `max_frame_size`,
// read, decoded and joined, is itself.
void check_block_round_trip(const h2::HeaderBlock& block, std::uint32_t max_frame_size) {
  std::string wire;
  h2::append_headers(wire, block.stream_id, block.block, block.end_stream, max_frame_size);
  std::vector<std::string> keep;
  h2::HeaderBlockAssembler again(std::size_t{1} << 30);
  std::optional<h2::HeaderBlock> got;
  for (const auto& frame : read_back(wire, keep)) {
    check(!got);
    auto b = again.on_frame(frame);
    check(b.ok());
    if (*b) got = std::move(**b);
  }
  check(got && got->stream_id == block.stream_id && got->end_stream == block.end_stream &&
        got->block == block.block);
}

void check_frames(std::string_view wire, const std::vector<std::size_t>& cuts,
                  std::uint32_t max_frame_size, std::size_t max_list, std::uint32_t table_size,
                  std::uint32_t write_frame_size) {
  const ReadOutcome whole = read_pieces(wire, {wire.size()}, max_frame_size);
  check(read_pieces(wire, cuts, max_frame_size) == whole);
  if (wire.size() <= 4096) {
    std::vector<std::size_t> bytes;
    for (std::size_t i = 1; i <= wire.size(); ++i) bytes.push_back(i);
    check(read_pieces(wire, bytes, max_frame_size) == whole);
  }

  h2::HeaderBlockAssembler assembler(max_list);
  HpackDecoder hpack(max_list, table_size);
  for (const auto& [header, payload] : whole.frames) {
    const auto sequence = assembler.check_sequence(header);
    if (!sequence) {
      check(sequence.error().scope == h2::ErrorScope::connection);
      check(sequence.error().code == h2::ErrorCode::protocol_error);
      check(sequence.error().message.rfind(frame_name(header) + " ", 0) == 0);
      return;
    }
    auto decoded = h2::decode_frame({header, payload});
    if (!decoded) {
      check_decode_error(header, decoded.error());
      // A stream error leaves the connection up; a connection error ends it.
      if (decoded.error().scope == h2::ErrorScope::connection) return;
      continue;
    }
    check_decoded(header, payload, *decoded, max_frame_size);
    auto block = assembler.on_frame(*decoded);
    if (!block) {
      // The sequence passed: only the bound is left.
      check(block.error().scope == h2::ErrorScope::connection && block.error().stream_id == 0);
      check(block.error().code == h2::ErrorCode::enhance_your_calm);
      return;
    }
    check(!(*block && assembler.in_block()));
    if (!*block) continue;
    check((*block)->block.size() <= max_list);
    check_block_round_trip(**block, write_frame_size);
    if (!hpack.decode((*block)->block)) return;  // COMPRESSION_ERROR: the connection ends
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  kinformer::fuzz::Input in(data, size);
  static constexpr std::size_t kMaxLists[] = {std::size_t{256} << 10, 4096, 100, 0};
  static constexpr std::uint32_t kTableSizes[] = {4096, 256, 0, 65536};
  const std::uint8_t b0 = in.byte();
  const std::size_t max_list = kMaxLists[b0 % 4];
  std::uint32_t limit = kTableSizes[b0 / 4 % 4];
  static constexpr std::uint32_t kMaxFrameSizes[] = {16384, 20000, 65535, (1u << 24) - 1};
  const std::uint32_t max_frame_size = kMaxFrameSizes[b0 / 16 % 4];
  const std::uint8_t b1 = in.byte();
  const int later_limit = b1 % 5;
  static constexpr std::uint32_t kWriteFrameSizes[] = {1, 7, 100, 16384};
  const std::uint32_t write_frame_size = kWriteFrameSizes[b1 / 8 % 4];
  const int n_cuts = in.byte() % 8;
  std::vector<std::size_t> raw;
  for (int i = 0; i < n_cuts; ++i) raw.push_back(in.byte() | (std::size_t{in.byte()} << 8));
  const std::string_view rest = in.rest();
  std::vector<std::size_t> cuts;
  for (std::size_t c : raw) cuts.push_back(c % (rest.size() + 1));
  std::sort(cuts.begin(), cuts.end());
  cuts.push_back(rest.size());

  check_integers(rest);
  check_frames(rest, cuts, max_frame_size, max_list, limit, write_frame_size);

  HpackDecoder d(max_list, limit);
  std::size_t at = 0;
  for (std::size_t i = 0; i < cuts.size(); ++i) {
    if (i == 1 && later_limit != 0) {
      static constexpr std::uint32_t kLater[] = {0, 0, 100, 4096, 65536};
      limit = kLater[later_limit];
      d.set_table_size_limit(limit);
    }
    const std::string_view block = rest.substr(at, cuts[i] - at);
    at = cuts[i];
    const bool failed_before = d.failed();
    auto r = d.decode(block);
    if (failed_before) {
      check(!r.ok() && r.error().message.find("decoder used after an error") != std::string::npos);
      continue;
    }
    if (!r) {
      check(d.failed());
      check_error(r.error(), block.size());
      continue;
    }
    check(!d.failed());
    check(list_size(*r) <= max_list);
    check(d.table_capacity() <= limit);
    check(d.table_size() <= d.table_capacity());
    check(list_size(d.dynamic_table()) == d.table_size());
    check_round_trips(*r, max_list);
  }
  return 0;
}
