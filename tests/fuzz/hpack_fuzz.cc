// libFuzzer target: the HPACK decoder (client/src/http2/hpack.h) fed one connection's header
// blocks in a row, so that the dynamic table carries from one to the next.
// Input: byte 0 picks max_header_list_size (b % 4: 256 KiB, 4 KiB, 100, 0) and the table size
// the connection starts with (b / 4 % 4: 4096, 256, 0, 65536); byte 1 picks a limit set before
// the second block (b % 5: none, 0, 100, 4096, 65536); byte 2 (% 8) is the number of cuts, each
// two bytes (little-endian, modulo the rest's size + 1); the rest, cut there, is the blocks.
// Seeds: tests/fuzz/corpus/hpack_fuzz/ (RFC 7541 Appendix C's sequences, with this header).
// Checked beyond "no crash":
//  - a decoded list counts at most max_header_list_size (name + value + 32 per field); the table
//    holds what table_size() says and no more than table_capacity(), itself within the limit;
//  - an error is Errc::decode or Errc::too_large, its message "HPACK: ... (at byte N)" with N
//    within the block; the decoder is failed() from then on and the next block says so;
//  - every decoded list, encoded by hpack_encode_request, decodes to itself (names lower-cased)
//    and leaves the table empty; every value, Huffman-coded, decodes to itself;
//  - an integer read from the input at any prefix re-encodes to at most the bytes it took, and
//    back to itself.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_input.h"
#include "http2/hpack.h"

namespace {

using kinformer::client::Errc;
using kinformer::client::detail::HeaderField;
using kinformer::client::detail::hpack_decode_integer;
using kinformer::client::detail::hpack_encode_integer;
using kinformer::client::detail::hpack_encode_request;
using kinformer::client::detail::hpack_huffman_encode;
using kinformer::client::detail::HpackDecoder;

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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  kinformer::fuzz::Input in(data, size);
  static constexpr std::size_t kMaxLists[] = {std::size_t{256} << 10, 4096, 100, 0};
  static constexpr std::uint32_t kTableSizes[] = {4096, 256, 0, 65536};
  const std::uint8_t b0 = in.byte();
  const std::size_t max_list = kMaxLists[b0 % 4];
  std::uint32_t limit = kTableSizes[b0 / 4 % 4];
  const int later_limit = in.byte() % 5;
  const int n_cuts = in.byte() % 8;
  std::vector<std::size_t> raw;
  for (int i = 0; i < n_cuts; ++i) raw.push_back(in.byte() | (std::size_t{in.byte()} << 8));
  const std::string_view rest = in.rest();
  std::vector<std::size_t> cuts;
  for (std::size_t c : raw) cuts.push_back(c % (rest.size() + 1));
  std::sort(cuts.begin(), cuts.end());
  cuts.push_back(rest.size());

  check_integers(rest);

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
