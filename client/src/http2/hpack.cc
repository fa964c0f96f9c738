#include "http2/hpack.h"

#include <algorithm>
#include <cassert>
#include <limits>
#include <utility>

namespace kinformer::client::detail {
namespace {

// RFC 7541 §4.1: an entry's size is its name's and its value's lengths plus 32 (an estimate of
// what an implementation spends on keeping it). SETTINGS_MAX_HEADER_LIST_SIZE counts the same.
constexpr std::size_t kEntryOverhead = 32;

struct StaticEntry {
  std::string_view name;
  std::string_view value;
};

// RFC 7541 Appendix A: index 1 is the first entry.
constexpr StaticEntry kStaticTable[] = {
    {":authority", ""},
    {":method", "GET"},
    {":method", "POST"},
    {":path", "/"},
    {":path", "/index.html"},
    {":scheme", "http"},
    {":scheme", "https"},
    {":status", "200"},
    {":status", "204"},
    {":status", "206"},
    {":status", "304"},
    {":status", "400"},
    {":status", "404"},
    {":status", "500"},
    {"accept-charset", ""},
    {"accept-encoding", "gzip, deflate"},
    {"accept-language", ""},
    {"accept-ranges", ""},
    {"accept", ""},
    {"access-control-allow-origin", ""},
    {"age", ""},
    {"allow", ""},
    {"authorization", ""},
    {"cache-control", ""},
    {"content-disposition", ""},
    {"content-encoding", ""},
    {"content-language", ""},
    {"content-length", ""},
    {"content-location", ""},
    {"content-range", ""},
    {"content-type", ""},
    {"cookie", ""},
    {"date", ""},
    {"etag", ""},
    {"expect", ""},
    {"expires", ""},
    {"from", ""},
    {"host", ""},
    {"if-match", ""},
    {"if-modified-since", ""},
    {"if-none-match", ""},
    {"if-range", ""},
    {"if-unmodified-since", ""},
    {"last-modified", ""},
    {"link", ""},
    {"location", ""},
    {"max-forwards", ""},
    {"proxy-authenticate", ""},
    {"proxy-authorization", ""},
    {"range", ""},
    {"referer", ""},
    {"refresh", ""},
    {"retry-after", ""},
    {"server", ""},
    {"set-cookie", ""},
    {"strict-transport-security", ""},
    {"transfer-encoding", ""},
    {"user-agent", ""},
    {"vary", ""},
    {"via", ""},
    {"www-authenticate", ""},
};
constexpr std::size_t kStaticEntries = std::size(kStaticTable);
static_assert(kStaticEntries == 61);

struct HuffmanCode {
  std::uint32_t bits;  // the code, in the low `length` bits
  std::uint8_t length;
};

constexpr int kHuffmanMaxLength = 30;
constexpr std::uint16_t kHuffmanEos = 256;

// RFC 7541 Appendix B, indexed by symbol: bytes 0-255, then EOS (256).
constexpr HuffmanCode kHuffmanCodes[257] = {
    {0x1ff8, 13},     {0x7fffd8, 23},   {0xfffffe2, 28},  {0xfffffe3, 28},  // 0-3
    {0xfffffe4, 28},  {0xfffffe5, 28},  {0xfffffe6, 28},  {0xfffffe7, 28},  // 4-7
    {0xfffffe8, 28},  {0xffffea, 24},   {0x3ffffffc, 30}, {0xfffffe9, 28},  // 8-11
    {0xfffffea, 28},  {0x3ffffffd, 30}, {0xfffffeb, 28},  {0xfffffec, 28},  // 12-15
    {0xfffffed, 28},  {0xfffffee, 28},  {0xfffffef, 28},  {0xffffff0, 28},  // 16-19
    {0xffffff1, 28},  {0xffffff2, 28},  {0x3ffffffe, 30}, {0xffffff3, 28},  // 20-23
    {0xffffff4, 28},  {0xffffff5, 28},  {0xffffff6, 28},  {0xffffff7, 28},  // 24-27
    {0xffffff8, 28},  {0xffffff9, 28},  {0xffffffa, 28},  {0xffffffb, 28},  // 28-31
    {0x14, 6},        {0x3f8, 10},      {0x3f9, 10},      {0xffa, 12},      // 32-35
    {0x1ff9, 13},     {0x15, 6},        {0xf8, 8},        {0x7fa, 11},      // 36-39
    {0x3fa, 10},      {0x3fb, 10},      {0xf9, 8},        {0x7fb, 11},      // 40-43
    {0xfa, 8},        {0x16, 6},        {0x17, 6},        {0x18, 6},        // 44-47
    {0x0, 5},         {0x1, 5},         {0x2, 5},         {0x19, 6},        // 48-51
    {0x1a, 6},        {0x1b, 6},        {0x1c, 6},        {0x1d, 6},        // 52-55
    {0x1e, 6},        {0x1f, 6},        {0x5c, 7},        {0xfb, 8},        // 56-59
    {0x7ffc, 15},     {0x20, 6},        {0xffb, 12},      {0x3fc, 10},      // 60-63
    {0x1ffa, 13},     {0x21, 6},        {0x5d, 7},        {0x5e, 7},        // 64-67
    {0x5f, 7},        {0x60, 7},        {0x61, 7},        {0x62, 7},        // 68-71
    {0x63, 7},        {0x64, 7},        {0x65, 7},        {0x66, 7},        // 72-75
    {0x67, 7},        {0x68, 7},        {0x69, 7},        {0x6a, 7},        // 76-79
    {0x6b, 7},        {0x6c, 7},        {0x6d, 7},        {0x6e, 7},        // 80-83
    {0x6f, 7},        {0x70, 7},        {0x71, 7},        {0x72, 7},        // 84-87
    {0xfc, 8},        {0x73, 7},        {0xfd, 8},        {0x1ffb, 13},     // 88-91
    {0x7fff0, 19},    {0x1ffc, 13},     {0x3ffc, 14},     {0x22, 6},        // 92-95
    {0x7ffd, 15},     {0x3, 5},         {0x23, 6},        {0x4, 5},         // 96-99
    {0x24, 6},        {0x5, 5},         {0x25, 6},        {0x26, 6},        // 100-103
    {0x27, 6},        {0x6, 5},         {0x74, 7},        {0x75, 7},        // 104-107
    {0x28, 6},        {0x29, 6},        {0x2a, 6},        {0x7, 5},         // 108-111
    {0x2b, 6},        {0x76, 7},        {0x2c, 6},        {0x8, 5},         // 112-115
    {0x9, 5},         {0x2d, 6},        {0x77, 7},        {0x78, 7},        // 116-119
    {0x79, 7},        {0x7a, 7},        {0x7b, 7},        {0x7ffe, 15},     // 120-123
    {0x7fc, 11},      {0x3ffd, 14},     {0x1ffd, 13},     {0xffffffc, 28},  // 124-127
    {0xfffe6, 20},    {0x3fffd2, 22},   {0xfffe7, 20},    {0xfffe8, 20},    // 128-131
    {0x3fffd3, 22},   {0x3fffd4, 22},   {0x3fffd5, 22},   {0x7fffd9, 23},   // 132-135
    {0x3fffd6, 22},   {0x7fffda, 23},   {0x7fffdb, 23},   {0x7fffdc, 23},   // 136-139
    {0x7fffdd, 23},   {0x7fffde, 23},   {0xffffeb, 24},   {0x7fffdf, 23},   // 140-143
    {0xffffec, 24},   {0xffffed, 24},   {0x3fffd7, 22},   {0x7fffe0, 23},   // 144-147
    {0xffffee, 24},   {0x7fffe1, 23},   {0x7fffe2, 23},   {0x7fffe3, 23},   // 148-151
    {0x7fffe4, 23},   {0x1fffdc, 21},   {0x3fffd8, 22},   {0x7fffe5, 23},   // 152-155
    {0x3fffd9, 22},   {0x7fffe6, 23},   {0x7fffe7, 23},   {0xffffef, 24},   // 156-159
    {0x3fffda, 22},   {0x1fffdd, 21},   {0xfffe9, 20},    {0x3fffdb, 22},   // 160-163
    {0x3fffdc, 22},   {0x7fffe8, 23},   {0x7fffe9, 23},   {0x1fffde, 21},   // 164-167
    {0x7fffea, 23},   {0x3fffdd, 22},   {0x3fffde, 22},   {0xfffff0, 24},   // 168-171
    {0x1fffdf, 21},   {0x3fffdf, 22},   {0x7fffeb, 23},   {0x7fffec, 23},   // 172-175
    {0x1fffe0, 21},   {0x1fffe1, 21},   {0x3fffe0, 22},   {0x1fffe2, 21},   // 176-179
    {0x7fffed, 23},   {0x3fffe1, 22},   {0x7fffee, 23},   {0x7fffef, 23},   // 180-183
    {0xfffea, 20},    {0x3fffe2, 22},   {0x3fffe3, 22},   {0x3fffe4, 22},   // 184-187
    {0x7ffff0, 23},   {0x3fffe5, 22},   {0x3fffe6, 22},   {0x7ffff1, 23},   // 188-191
    {0x3ffffe0, 26},  {0x3ffffe1, 26},  {0xfffeb, 20},    {0x7fff1, 19},    // 192-195
    {0x3fffe7, 22},   {0x7ffff2, 23},   {0x3fffe8, 22},   {0x1ffffec, 25},  // 196-199
    {0x3ffffe2, 26},  {0x3ffffe3, 26},  {0x3ffffe4, 26},  {0x7ffffde, 27},  // 200-203
    {0x7ffffdf, 27},  {0x3ffffe5, 26},  {0xfffff1, 24},   {0x1ffffed, 25},  // 204-207
    {0x7fff2, 19},    {0x1fffe3, 21},   {0x3ffffe6, 26},  {0x7ffffe0, 27},  // 208-211
    {0x7ffffe1, 27},  {0x3ffffe7, 26},  {0x7ffffe2, 27},  {0xfffff2, 24},   // 212-215
    {0x1fffe4, 21},   {0x1fffe5, 21},   {0x3ffffe8, 26},  {0x3ffffe9, 26},  // 216-219
    {0xffffffd, 28},  {0x7ffffe3, 27},  {0x7ffffe4, 27},  {0x7ffffe5, 27},  // 220-223
    {0xfffec, 20},    {0xfffff3, 24},   {0xfffed, 20},    {0x1fffe6, 21},   // 224-227
    {0x3fffe9, 22},   {0x1fffe7, 21},   {0x1fffe8, 21},   {0x7ffff3, 23},   // 228-231
    {0x3fffea, 22},   {0x3fffeb, 22},   {0x1ffffee, 25},  {0x1ffffef, 25},  // 232-235
    {0xfffff4, 24},   {0xfffff5, 24},   {0x3ffffea, 26},  {0x7ffff4, 23},   // 236-239
    {0x3ffffeb, 26},  {0x7ffffe6, 27},  {0x3ffffec, 26},  {0x3ffffed, 26},  // 240-243
    {0x7ffffe7, 27},  {0x7ffffe8, 27},  {0x7ffffe9, 27},  {0x7ffffea, 27},  // 244-247
    {0x7ffffeb, 27},  {0xffffffe, 28},  {0x7ffffec, 27},  {0x7ffffed, 27},  // 248-251
    {0x7ffffee, 27},  {0x7ffffef, 27},  {0x7fffff0, 27},  {0x3ffffee, 26},  // 252-255
    {0x3fffffff, 30},                                                       // 256: EOS
};

// The code is canonical, as Appendix B lists it: the codes of one length are consecutive numbers
// given to the symbols in increasing order, and the first code of a length follows the last of
// the length before. So the decoder needs no tree: per length, the first code, how many codes
// there are and where their symbols start in the symbols sorted by (length, symbol).
struct HuffmanDecodeTable {
  std::uint32_t first_code[kHuffmanMaxLength + 1] = {};
  std::uint16_t count[kHuffmanMaxLength + 1] = {};
  std::uint16_t first_symbol[kHuffmanMaxLength + 1] = {};
  std::uint16_t symbols[257] = {};
  // Every code is the canonical one for its length, and together they use up every 30-bit
  // string (no bit pattern is left that decodes to nothing, so a code ends within 30 bits).
  bool canonical_and_complete = true;
};

constexpr HuffmanDecodeTable make_huffman_decode_table() {
  HuffmanDecodeTable t;
  std::uint16_t n = 0;
  std::uint32_t code = 0;
  for (int length = 1; length <= kHuffmanMaxLength; ++length) {
    code <<= 1;
    t.first_code[length] = code;
    t.first_symbol[length] = n;
    for (std::uint16_t symbol = 0; symbol <= kHuffmanEos; ++symbol) {
      if (kHuffmanCodes[symbol].length != length) continue;
      if (kHuffmanCodes[symbol].bits != code) t.canonical_and_complete = false;
      t.symbols[n++] = symbol;
      ++t.count[length];
      ++code;
    }
  }
  if (n != 257 || code != (std::uint32_t{1} << kHuffmanMaxLength)) {
    t.canonical_and_complete = false;
  }
  return t;
}

constexpr HuffmanDecodeTable kHuffmanDecode = make_huffman_decode_table();
// Guards the table above against a typing error and the decoder's assumptions with it.
static_assert(kHuffmanDecode.canonical_and_complete,
              "kHuffmanCodes is not RFC 7541's canonical code");

std::string at_byte(std::size_t at) { return " (at byte " + std::to_string(at) + ")"; }

Error hpack_error(std::size_t at, const std::string& what) {
  return Error::make(Errc::decode, "HPACK: " + what + at_byte(at));
}

Error list_too_large(std::size_t at, std::size_t max_header_list_size) {
  return Error::make(Errc::too_large,
                     "HPACK: header list larger than " + std::to_string(max_header_list_size) +
                         " bytes (max_header_list_size; a field counts its name, its value and " +
                         std::to_string(kEntryOverhead) + ")" + at_byte(at));
}

// What is left of `budget` after `used`, or 0.
std::size_t room_after(std::size_t budget, std::size_t used) {
  return budget > used ? budget - used : 0;
}

// A header block being read: where the reader is, and its strings.
class BlockReader {
 public:
  BlockReader(std::string_view bytes, std::size_t max_header_list_size)
      : bytes_(bytes), max_header_list_size_(max_header_list_size) {}

  [[nodiscard]] bool at_end() const { return pos_ == bytes_.size(); }
  [[nodiscard]] std::size_t pos() const { return pos_; }
  [[nodiscard]] std::uint8_t peek() const { return static_cast<std::uint8_t>(bytes_[pos_]); }

  Result<std::uint32_t> integer(int prefix_bits) {
    return hpack_decode_integer(bytes_, pos_, prefix_bits);
  }

  // A string literal (RFC 7541 §5.2), raw or Huffman-coded; Errc::too_large if it would be
  // longer than `budget` bytes decoded, the room the header list has left for it.
  Result<std::string> string(std::size_t budget) {
    const std::size_t start = pos_;
    if (at_end()) return hpack_error(start, "string literal truncated: the block ends before it");
    const bool huffman = (peek() & 0x80) != 0;
    auto length = integer(7);
    if (!length) return std::move(length).error();
    const std::size_t left_in_block = bytes_.size() - pos_;
    if (*length > left_in_block) {
      return hpack_error(start, "string literal of " + std::to_string(*length) +
                                    " bytes is longer than the rest of the block (" +
                                    std::to_string(left_in_block) + " bytes)");
    }
    const std::size_t data_at = pos_;
    const std::string_view data = bytes_.substr(pos_, *length);
    pos_ += *length;
    if (!huffman) {
      if (data.size() > budget) return list_too_large(start, max_header_list_size_);
      return std::string(data);
    }
    return huffman_decode(data, data_at, budget);
  }

 private:
  // Decodes bit by bit: a code is a prefix of nothing else, so the first (length, code) that is
  // one of the table's is the symbol. Header strings are short; this is not a hot path.
  Result<std::string> huffman_decode(std::string_view data, std::size_t data_at,
                                     std::size_t budget) const {
    const HuffmanDecodeTable& t = kHuffmanDecode;
    std::string out;
    // The shortest code has 5 bits: at most 8 symbols for every 5 bytes.
    out.reserve(std::min(data.size() / 5 * 8 + 8, budget));
    std::uint32_t code = 0;
    int length = 0;  // bits in `code`, read since the last symbol
    for (std::size_t i = 0; i < data.size(); ++i) {
      const auto byte = static_cast<std::uint8_t>(data[i]);
      for (int bit = 7; bit >= 0; --bit) {
        code = (code << 1) | ((byte >> bit) & 1u);
        ++length;
        // Below the first code of this length, the difference wraps and is past the count.
        const std::uint32_t k = code - t.first_code[length];
        if (k >= t.count[length]) continue;
        const std::uint16_t symbol = t.symbols[t.first_symbol[length] + k];
        if (symbol == kHuffmanEos) {
          return hpack_error(data_at + i, "Huffman-coded string contains the EOS symbol");
        }
        if (out.size() >= budget) return list_too_large(data_at + i, max_header_list_size_);
        out.push_back(static_cast<char>(symbol));
        code = 0;
        length = 0;
      }
    }
    // What follows the last symbol is padding: the first bits of EOS (all ones), fewer than 8.
    const std::size_t last = data_at + data.size() - (data.empty() ? 0 : 1);
    if (length > 7) {
      return hpack_error(last, "Huffman-coded string ends in padding longer than 7 bits (" +
                                   std::to_string(length) + ")");
    }
    if (code != (std::uint32_t{1} << length) - 1) {
      return hpack_error(last, "Huffman-coded string ends in padding that is not all ones");
    }
    return out;
  }

  std::string_view bytes_;
  std::size_t max_header_list_size_;
  std::size_t pos_ = 0;
};

// A field of either table, as views: valid until the dynamic table next changes.
struct FieldView {
  std::string_view name;
  std::string_view value;
};

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// The index of the first static entry named `name`, or 0.
std::size_t static_name_index(std::string_view name) {
  for (std::size_t i = 0; i < kStaticEntries; ++i) {
    if (kStaticTable[i].name == name) return i + 1;
  }
  return 0;
}

void put_string(std::string& out, std::string_view s) {
  hpack_encode_integer(out, 0x00, 7, s.size());  // H = 0: not Huffman-coded
  out.append(s);
}

}  // namespace

void hpack_encode_integer(std::string& out, std::uint8_t flags, int prefix_bits,
                          std::uint64_t value) {
  assert(prefix_bits >= 1 && prefix_bits <= 8);
  const std::uint32_t prefix_max = (std::uint32_t{1} << prefix_bits) - 1;
  if (value < prefix_max) {
    out.push_back(static_cast<char>(flags | value));
    return;
  }
  out.push_back(static_cast<char>(flags | prefix_max));
  value -= prefix_max;
  while (value >= 0x80) {
    out.push_back(static_cast<char>(0x80 | (value & 0x7f)));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

Result<std::uint32_t> hpack_decode_integer(std::string_view in, std::size_t& pos, int prefix_bits) {
  assert(prefix_bits >= 1 && prefix_bits <= 8);
  const std::size_t start = pos;
  if (pos >= in.size()) return hpack_error(start, "integer truncated: the block ends before it");
  const std::uint32_t prefix_max = (std::uint32_t{1} << prefix_bits) - 1;
  std::uint64_t value = static_cast<std::uint8_t>(in[pos++]) & prefix_max;
  if (value < prefix_max) return static_cast<std::uint32_t>(value);
  // Then 7 bits a byte, least significant first, while the top bit is set. Five bytes carry 35
  // bits, enough for any 32-bit value; a sixth is refused before the sum could overflow.
  for (int shift = 0;; shift += 7) {
    if (pos >= in.size()) return hpack_error(start, "integer truncated: the block ends inside it");
    if (shift > 28) return hpack_error(start, "integer overflow: longer than any 32-bit value");
    const auto byte = static_cast<std::uint8_t>(in[pos++]);
    value += std::uint64_t{byte & 0x7fu} << shift;
    if (value > std::numeric_limits<std::uint32_t>::max()) {
      return hpack_error(start, "integer overflow: larger than 2^32 - 1");
    }
    if ((byte & 0x80) == 0) return static_cast<std::uint32_t>(value);
  }
}

std::string hpack_huffman_encode(std::string_view s) {
  std::string out;
  std::uint64_t pending = 0;  // bits not written yet, in the low `n` bits
  int n = 0;
  for (const char c : s) {
    const HuffmanCode& code = kHuffmanCodes[static_cast<std::uint8_t>(c)];
    pending = (pending << code.length) | code.bits;
    n += code.length;
    while (n >= 8) {
      n -= 8;
      out.push_back(static_cast<char>((pending >> n) & 0xff));
    }
    pending &= (std::uint64_t{1} << n) - 1;
  }
  if (n > 0) {
    // Pad with the first bits of EOS, which are ones.
    const auto pad = static_cast<unsigned>(8 - n);
    out.push_back(static_cast<char>((pending << pad) | ((1u << pad) - 1)));
  }
  return out;
}

std::string hpack_encode_request(const std::vector<HeaderField>& fields,
                                 std::optional<std::uint32_t> table_size_update) {
  std::string out;
  if (table_size_update) hpack_encode_integer(out, 0x20, 5, *table_size_update);
  for (const HeaderField& field : fields) {
    const std::string name = ascii_lower(field.name);
    const bool never_indexed =
        name == "authorization" || name == "proxy-authorization" || name == "cookie";
    // 0001xxxx: literal never indexed; 0000xxxx: literal without indexing. Both with a 4-bit
    // prefix for the name's index, 0 for a name that follows as a string.
    const std::size_t name_index = static_name_index(name);
    hpack_encode_integer(out, never_indexed ? 0x10 : 0x00, 4, name_index);
    if (name_index == 0) put_string(out, name);
    put_string(out, field.value);
  }
  return out;
}

HpackDecoder::HpackDecoder(std::size_t max_header_list_size, std::uint32_t table_size_limit)
    : max_header_list_size_(max_header_list_size),
      limit_(table_size_limit),
      lowest_limit_(table_size_limit),
      capacity_(table_size_limit) {}

void HpackDecoder::set_table_size_limit(std::uint32_t limit) {
  limit_ = limit;
  lowest_limit_ = std::min(lowest_limit_, limit);
}

std::vector<HeaderField> HpackDecoder::dynamic_table() const {
  return {table_.begin(), table_.end()};
}

Result<std::vector<HeaderField>> HpackDecoder::decode(std::string_view block) {
  if (failure_) {
    constexpr std::string_view kPrefix = "HPACK: ";
    std::string_view earlier = failure_->message;
    if (earlier.substr(0, kPrefix.size()) == kPrefix) earlier.remove_prefix(kPrefix.size());
    return Error::make(failure_->code,
                       "HPACK: decoder used after an error (its table may no longer match the "
                       "peer's: a connection error); the error was: " +
                           std::string(earlier));
  }
  auto fields = decode_block(block);
  if (!fields) {
    failure_ = fields.error();
  } else {
    lowest_limit_ = limit_;
  }
  return fields;
}

Result<std::vector<HeaderField>> HpackDecoder::decode_block(std::string_view bytes) {
  BlockReader in(bytes, max_header_list_size_);
  std::vector<HeaderField> fields;
  std::size_t list_size = 0;  // as SETTINGS_MAX_HEADER_LIST_SIZE counts
  // RFC 7541 §4.2: size updates come first in a block, and once the limit went below the
  // table's maximum size, one of them must bring it to at most the lowest limit set since the
  // last block.
  const bool update_required = lowest_limit_ < capacity_;
  std::optional<std::uint32_t> lowest_update;
  bool in_fields = false;
  auto check_required_update = [&](std::size_t at) -> Status {
    if (!update_required || (lowest_update && *lowest_update <= lowest_limit_)) return Ok{};
    return hpack_error(at, "the block does not start with a dynamic table size update to at most " +
                               std::to_string(lowest_limit_) +
                               ", though SETTINGS_HEADER_TABLE_SIZE went below the table's "
                               "maximum size (" +
                               std::to_string(capacity_) + ")");
  };
  // Index 0 is no entry; 1-61 are the static table's; from 62, the dynamic table's, newest first.
  auto lookup = [&](std::uint32_t index, std::size_t at) -> Result<FieldView> {
    if (index == 0) return hpack_error(at, "index 0, which is no table entry");
    if (index <= kStaticEntries) {
      const StaticEntry& e = kStaticTable[index - 1];
      return FieldView{e.name, e.value};
    }
    const std::size_t dynamic_index = index - kStaticEntries - 1;
    if (dynamic_index >= table_.size()) {
      return hpack_error(at, "index " + std::to_string(index) +
                                 " is past the end of the table (61 static entries and " +
                                 std::to_string(table_.size()) + " dynamic)");
    }
    const HeaderField& e = table_[dynamic_index];
    return FieldView{e.name, e.value};
  };

  while (!in.at_end()) {
    const std::size_t at = in.pos();
    const std::uint8_t first = in.peek();
    if ((first & 0xe0) == 0x20) {  // 001xxxxx: dynamic table size update
      if (in_fields) {
        return hpack_error(at,
                           "dynamic table size update after a header field (it may only "
                           "start a block)");
      }
      auto size = in.integer(5);
      if (!size) return std::move(size).error();
      if (*size > limit_) {
        return hpack_error(at, "dynamic table size update to " + std::to_string(*size) +
                                   " is above the limit of " + std::to_string(limit_) +
                                   " (SETTINGS_HEADER_TABLE_SIZE)");
      }
      lowest_update = std::min(lowest_update.value_or(*size), *size);
      resize_table(*size);
      continue;
    }
    if (!in_fields) {
      if (auto s = check_required_update(at); !s) return std::move(s).error();
      in_fields = true;
    }

    HeaderField field;
    bool add = false;
    if ((first & 0x80) != 0) {  // 1xxxxxxx: indexed field
      auto index = in.integer(7);
      if (!index) return std::move(index).error();
      auto entry = lookup(*index, at);
      if (!entry) return std::move(entry).error();
      field = HeaderField{std::string(entry->name), std::string(entry->value)};
    } else {
      // 01xxxxxx: literal with incremental indexing (6-bit name index); 0000xxxx without
      // indexing and 0001xxxx never indexed (4-bit). Index 0: the name follows as a string.
      add = (first & 0x40) != 0;
      // The strings are bounded as they are read: what the list has left for this field.
      const std::size_t room = room_after(max_header_list_size_, list_size + kEntryOverhead);
      auto name_index = in.integer(add ? 6 : 4);
      if (!name_index) return std::move(name_index).error();
      if (*name_index == 0) {
        auto name = in.string(room);
        if (!name) return std::move(name).error();
        field.name = std::move(*name);
      } else {
        auto entry = lookup(*name_index, at);
        if (!entry) return std::move(entry).error();
        field.name = std::string(entry->name);  // a copy: adding the field may evict the entry
      }
      auto value = in.string(room_after(room, field.name.size()));
      if (!value) return std::move(value).error();
      field.value = std::move(*value);
    }
    // The bound on what a block can make us hold: a one-byte indexed field can repeat a table
    // entry of kilobytes, and a block of them would otherwise cost thousands of times its size.
    const std::size_t size = field.name.size() + field.value.size() + kEntryOverhead;
    if (size > room_after(max_header_list_size_, list_size)) {
      return list_too_large(at, max_header_list_size_);
    }
    list_size += size;
    if (add) add_to_table(field);
    fields.push_back(std::move(field));
  }
  if (!in_fields) {
    if (auto s = check_required_update(bytes.size()); !s) return std::move(s).error();
  }
  return fields;
}

void HpackDecoder::resize_table(std::uint32_t capacity) {
  capacity_ = capacity;
  while (table_size_ > capacity_) {
    table_size_ -= table_.back().name.size() + table_.back().value.size() + kEntryOverhead;
    table_.pop_back();
  }
}

void HpackDecoder::add_to_table(HeaderField field) {
  const std::size_t size = field.name.size() + field.value.size() + kEntryOverhead;
  // RFC 7541 §4.4: an entry larger than the table empties it and is not added (no error).
  if (size > capacity_) {
    table_.clear();
    table_size_ = 0;
    return;
  }
  while (table_size_ + size > capacity_) {
    table_size_ -= table_.back().name.size() + table_.back().value.size() + kEntryOverhead;
    table_.pop_back();
  }
  table_size_ += size;
  table_.push_front(std::move(field));
}

}  // namespace kinformer::client::detail
