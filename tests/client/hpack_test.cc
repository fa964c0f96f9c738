// HPACK (client/src/http2/hpack.h): every example of RFC 7541 Appendix C as published (integers,
// single fields, requests and responses with and without Huffman coding, a 256-byte table with
// evictions), the request encoder through the decoder, the Huffman code in full, and each way a
// block is refused, with where.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <string_view>
#include <vector>

#include "hex_bytes.h"
#include "http2/hpack.h"  // client/src

namespace kinformer::client {
namespace {

using detail::HeaderField;
using detail::hpack_decode_integer;
using detail::hpack_encode_integer;
using detail::hpack_encode_request;
using detail::hpack_huffman_encode;
using detail::HpackDecoder;
using ::testing::HasSubstr;
using HeaderList = std::vector<HeaderField>;

using kinformer::testing::hex_bytes;

// A literal field without indexing, new name (raw), value Huffman-coded.
std::string literal_with_huffman_value(std::string_view name, std::string_view value) {
  std::string out(1, '\0');
  hpack_encode_integer(out, 0x00, 7, name.size());
  out.append(name);
  const std::string coded = hpack_huffman_encode(value);
  hpack_encode_integer(out, 0x80, 7, coded.size());
  return out + coded;
}

// The error of decoding `block` (hex), which must fail; the decoder is then unusable.
Error hpack_error_of(HpackDecoder& d, std::string_view hex) {
  auto r = d.decode(hex_bytes(hex));
  EXPECT_FALSE(r) << "decoded " << r->size() << " fields";
  EXPECT_TRUE(d.failed());
  return r ? Error{} : r.error();
}

// One block of an Appendix C example: its hex dump, the header list it decodes to, and the
// dynamic table after it (newest first) with its size.
struct RfcBlock {
  std::string_view section;
  std::string_view hex;
  HeaderList headers;
  HeaderList table;
  std::size_t table_size;
};

void expect_rfc_sequence(HpackDecoder& d, const std::vector<RfcBlock>& blocks) {
  for (const RfcBlock& b : blocks) {
    SCOPED_TRACE(b.section);
    auto r = d.decode(hex_bytes(b.hex));
    ASSERT_TRUE(r) << r.error().to_string();
    EXPECT_EQ(*r, b.headers);
    EXPECT_EQ(d.dynamic_table(), b.table);
    EXPECT_EQ(d.table_size(), b.table_size);
  }
}

const HeaderField kAuthority{":authority", "www.example.com"};
const HeaderField kNoCache{"cache-control", "no-cache"};
const HeaderField kCustom{"custom-key", "custom-value"};
const HeaderList kRequest1 = {{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, kAuthority};
const HeaderList kRequest2 = {
    {":method", "GET"}, {":scheme", "http"}, {":path", "/"}, kAuthority, kNoCache};
const HeaderList kRequest3 = {
    {":method", "GET"}, {":scheme", "https"}, {":path", "/index.html"}, kAuthority, kCustom};

const HeaderField kPrivate{"cache-control", "private"};
const HeaderField kDate21{"date", "Mon, 21 Oct 2013 20:13:21 GMT"};
const HeaderField kDate22{"date", "Mon, 21 Oct 2013 20:13:22 GMT"};
const HeaderField kLocation{"location", "https://www.example.com"};
const HeaderField kGzip{"content-encoding", "gzip"};
const HeaderField kCookie{"set-cookie", "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"};
const HeaderList kResponse1 = {{":status", "302"}, kPrivate, kDate21, kLocation};
const HeaderList kResponse2 = {{":status", "307"}, kPrivate, kDate21, kLocation};
const HeaderList kResponse3 = {{":status", "200"}, kPrivate, kDate22, kLocation, kGzip, kCookie};
const HeaderList kResponseTable1 = {kLocation, kDate21, kPrivate, {":status", "302"}};
const HeaderList kResponseTable2 = {{":status", "307"}, kLocation, kDate21, kPrivate};
const HeaderList kResponseTable3 = {kCookie, kGzip, kDate22};

// --- RFC 7541 Appendix C ---------------------------------------------------------------------

TEST(HpackInteger, AppendixC1Examples) {
  std::string out;
  hpack_encode_integer(out, 0x00, 5, 10);  // C.1.1: 10 with a 5-bit prefix
  EXPECT_EQ(out, hex_bytes("0a"));
  out.clear();
  hpack_encode_integer(out, 0x00, 5, 1337);  // C.1.2: 1337 with a 5-bit prefix
  EXPECT_EQ(out, hex_bytes("1f 9a 0a"));
  out.clear();
  hpack_encode_integer(out, 0x00, 8, 42);  // C.1.3: 42 starting at an octet boundary
  EXPECT_EQ(out, hex_bytes("2a"));

  // The bits above the prefix belong to the representation and are not part of the number.
  struct Case {
    std::string_view hex;
    int prefix_bits;
    std::uint32_t value;
  };
  for (const Case& c : {Case{"ea", 5, 10}, Case{"0a", 5, 10}, Case{"ff 9a 0a", 5, 1337},
                        Case{"1f 9a 0a", 5, 1337}, Case{"2a", 8, 42}}) {
    const std::string in = hex_bytes(c.hex);
    std::size_t pos = 0;
    auto v = hpack_decode_integer(in, pos, c.prefix_bits);
    ASSERT_TRUE(v) << c.hex << ": " << v.error().to_string();
    EXPECT_EQ(*v, c.value) << c.hex;
    EXPECT_EQ(pos, in.size()) << c.hex;
  }
}

TEST(HpackInteger, RoundTripsEveryPrefixUpTo32Bits) {
  for (int prefix = 1; prefix <= 8; ++prefix) {
    for (std::uint64_t v : {0ull, 1ull, 30ull, 31ull, 127ull, 254ull, 255ull, 256ull, 1337ull,
                            (1ull << 28) - 1, 1ull << 28, 0xffffffffull}) {
      std::string out = "x";  // decoding starts where the integer does
      const auto flags = static_cast<std::uint8_t>(0xff << prefix);
      hpack_encode_integer(out, flags, prefix, v);
      std::size_t pos = 1;
      auto r = hpack_decode_integer(out, pos, prefix);
      ASSERT_TRUE(r) << prefix << " " << v << ": " << r.error().to_string();
      EXPECT_EQ(*r, v) << prefix;
      EXPECT_EQ(pos, out.size());
      if (prefix < 8) {
        EXPECT_EQ(static_cast<std::uint8_t>(out[1]) & flags, flags) << "flags kept";
      }
    }
  }
}

TEST(HpackDecoder, AppendixC2SingleFields) {
  {
    HpackDecoder d;  // C.2.1: literal with indexing
    expect_rfc_sequence(d, {{"C.2.1",
                             "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
                             {{"custom-key", "custom-header"}},
                             {{"custom-key", "custom-header"}},
                             55}});
  }
  {
    HpackDecoder d;  // C.2.2: literal without indexing
    expect_rfc_sequence(
        d, {{"C.2.2", "040c 2f73 616d 706c 652f 7061 7468", {{":path", "/sample/path"}}, {}, 0}});
  }
  {
    HpackDecoder d;  // C.2.3: literal never indexed
    expect_rfc_sequence(
        d,
        {{"C.2.3", "1008 7061 7373 776f 7264 0673 6563 7265 74", {{"password", "secret"}}, {}, 0}});
  }
  {
    HpackDecoder d;  // C.2.4: indexed
    expect_rfc_sequence(d, {{"C.2.4", "82", {{":method", "GET"}}, {}, 0}});
  }
}

TEST(HpackDecoder, AppendixC3RequestsWithoutHuffman) {
  HpackDecoder d;
  expect_rfc_sequence(
      d,
      {{"C.3.1", "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d", kRequest1, {kAuthority}, 57},
       {"C.3.2", "8286 84be 5808 6e6f 2d63 6163 6865", kRequest2, {kNoCache, kAuthority}, 110},
       {"C.3.3",
        "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
        kRequest3,
        {kCustom, kNoCache, kAuthority},
        164}});
}

TEST(HpackDecoder, AppendixC4RequestsWithHuffman) {
  HpackDecoder d;
  expect_rfc_sequence(
      d, {{"C.4.1", "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff", kRequest1, {kAuthority}, 57},
          {"C.4.2", "8286 84be 5886 a8eb 1064 9cbf", kRequest2, {kNoCache, kAuthority}, 110},
          {"C.4.3",
           "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
           kRequest3,
           {kCustom, kNoCache, kAuthority},
           164}});
}

TEST(HpackDecoder, AppendixC5ResponsesWithoutHuffmanEvictFromA256ByteTable) {
  HpackDecoder d(HpackDecoder::kDefaultMaxHeaderListSize, 256);
  expect_rfc_sequence(d, {{"C.5.1",
                           "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 "
                           "7420 3230 3133 2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 "
                           "3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
                           kResponse1, kResponseTable1, 222},
                          {"C.5.2", "4803 3330 37c1 c0bf", kResponse2, kResponseTable2, 222},
                          {"C.5.3",
                           "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 "
                           "3a32 3220 474d 54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 "
                           "514b 425a 584f 5157 454f 5049 5541 5851 5745 4f49 553b 206d 6178 "
                           "2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e 3d31",
                           kResponse3, kResponseTable3, 215}});
  EXPECT_EQ(d.table_capacity(), 256u);
}

TEST(HpackDecoder, AppendixC6ResponsesWithHuffmanEvictFromA256ByteTable) {
  HpackDecoder d(HpackDecoder::kDefaultMaxHeaderListSize, 256);
  expect_rfc_sequence(d, {{"C.6.1",
                           "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 "
                           "0b81 66e0 82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae "
                           "43d3",
                           kResponse1, kResponseTable1, 222},
                          {"C.6.2", "4883 640e ffc1 c0bf", kResponse2, kResponseTable2, 222},
                          {"C.6.3",
                           "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff "
                           "c05a 839b d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af "
                           "2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
                           kResponse3, kResponseTable3, 215}});
}

TEST(HpackHuffman, EncodesTheStringsOfAppendixCAsPublished) {
  struct Case {
    std::string_view text;
    std::string_view hex;
  };
  for (const Case& c : {
           Case{"www.example.com", "f1e3 c2e5 f23a 6ba0 ab90 f4ff"},
           Case{"no-cache", "a8eb 1064 9cbf"},
           Case{"custom-key", "25a8 49e9 5ba9 7d7f"},
           Case{"custom-value", "25a8 49e9 5bb8 e8b4 bf"},
           Case{"302", "6402"},
           Case{"307", "640e ff"},
           Case{"private", "aec3 771a 4b"},
           Case{"Mon, 21 Oct 2013 20:13:21 GMT",
                "d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff"},
           Case{"https://www.example.com", "9d29 ad17 1863 c78f 0b97 c8e9 ae82 ae43 d3"},
           Case{"gzip", "9bd9 ab"},
           Case{"foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
                "94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f "
                "9587 3160 65c0 03ed 4ee5 b106 3d50 07"},
       }) {
    EXPECT_EQ(hpack_huffman_encode(c.text), hex_bytes(c.hex)) << c.text;
  }
  EXPECT_EQ(hpack_huffman_encode(""), "");
}

// --- the Huffman code in full ----------------------------------------------------------------

TEST(HpackHuffman, EveryByteValueRoundTrips) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  std::vector<std::string> values = {all, std::string(all.rbegin(), all.rend()), ""};
  for (int b = 0; b < 256; ++b) {
    values.emplace_back(1, static_cast<char>(b));            // each code alone, padded
    values.push_back(std::string(3, static_cast<char>(b)));  // and at each alignment
  }
  HpackDecoder d;
  for (const std::string& value : values) {
    auto r = d.decode(literal_with_huffman_value("v", value));
    ASSERT_TRUE(r) << r.error().to_string();
    ASSERT_EQ(r->size(), 1u);
    EXPECT_EQ((*r)[0].value, value) << "length " << value.size();
  }
}

TEST(HpackHuffman, NamesAreHuffmanCodedToo) {
  // 0x40: literal with indexing, new name; both strings Huffman-coded.
  std::string block(1, '\x40');
  for (std::string_view s : {"x-kubernetes-pf-flowschema-uid", "b1ba7a2c"}) {
    const std::string coded = hpack_huffman_encode(s);
    hpack_encode_integer(block, 0x80, 7, coded.size());
    block += coded;
  }
  HpackDecoder d;
  auto r = d.decode(block);
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(*r, (HeaderList{{"x-kubernetes-pf-flowschema-uid", "b1ba7a2c"}}));
  EXPECT_EQ(d.dynamic_table(), *r);
}

// --- the dynamic table -----------------------------------------------------------------------

TEST(HpackDecoder, SizeUpdatesAtTheStartResizeTheTable) {
  HpackDecoder d;
  ASSERT_TRUE(d.decode(hex_bytes("8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d")));
  ASSERT_EQ(d.table_size(), 57u);
  // C.1.2's integer as a size update (001 and a 5-bit prefix): 1337. Then two in a row.
  auto r = d.decode(hex_bytes("3f9a0a 82"));
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(d.table_capacity(), 1337u);
  EXPECT_EQ(d.table_size(), 57u);
  r = d.decode(hex_bytes("20 3fe11f"));  // to 0 (empties it), then back to 4096
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_TRUE(r->empty());
  EXPECT_EQ(d.table_capacity(), 4096u);
  EXPECT_EQ(d.table_size(), 0u);
  EXPECT_TRUE(d.dynamic_table().empty());
}

TEST(HpackDecoder, AnEntryLargerThanTheTableEmptiesItAndIsNotAdded) {
  HpackDecoder d(HpackDecoder::kDefaultMaxHeaderListSize, 100);
  ASSERT_TRUE(d.decode(hex_bytes("40 0161 0162")));  // a: b, 34 bytes
  ASSERT_EQ(d.table_size(), 34u);
  std::string block = hex_bytes("40 0163 46");  // c: 70 bytes of x: 103 > 100
  block += std::string(70, 'x');
  auto r = d.decode(block);
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(*r, (HeaderList{{"c", std::string(70, 'x')}}));
  EXPECT_TRUE(d.dynamic_table().empty());
  EXPECT_EQ(d.table_size(), 0u);
}

TEST(HpackDecoder, ANameFromTheEntryItsOwnInsertionEvictsIsKept) {
  // RFC 7541 §4.4: the new entry may name an entry that adding it evicts.
  HpackDecoder d(HpackDecoder::kDefaultMaxHeaderListSize, 100);
  ASSERT_TRUE(d.decode(hex_bytes("40 0461616161 0131")));  // aaaa: 1, 37 bytes
  std::string block = hex_bytes("7e 28");                  // name: index 62; value: 40 bytes
  block += std::string(40, 'y');                           // 76 bytes: 37 + 76 > 100
  auto r = d.decode(block);
  ASSERT_TRUE(r) << r.error().to_string();
  const HeaderList want = {{"aaaa", std::string(40, 'y')}};
  EXPECT_EQ(*r, want);
  EXPECT_EQ(d.dynamic_table(), want);
  EXPECT_EQ(d.table_size(), 76u);
}

TEST(HpackDecoder, ALowerLimitNeedsASizeUpdateAtTheStartOfTheNextBlock) {
  const std::string first = hex_bytes("8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d");
  {
    HpackDecoder d;
    ASSERT_TRUE(d.decode(first));
    d.set_table_size_limit(0);
    Error e = hpack_error_of(d, "82");
    EXPECT_EQ(e.code, Errc::decode);
    EXPECT_THAT(e.message, HasSubstr("does not start with a dynamic table size update to at "
                                     "most 0, though SETTINGS_HEADER_TABLE_SIZE went below the "
                                     "table's maximum size (4096) (at byte 0)"));
  }
  {
    HpackDecoder d;  // the update comes: the table is emptied
    ASSERT_TRUE(d.decode(first));
    d.set_table_size_limit(0);
    auto r = d.decode(hex_bytes("20 82"));
    ASSERT_TRUE(r) << r.error().to_string();
    EXPECT_EQ(*r, (HeaderList{{":method", "GET"}}));
    EXPECT_EQ(d.table_capacity(), 0u);
    EXPECT_TRUE(d.dynamic_table().empty());
  }
  {
    HpackDecoder d;  // lowered and raised again between blocks: the lowest must be signalled
    ASSERT_TRUE(d.decode(first));
    d.set_table_size_limit(100);
    d.set_table_size_limit(4096);
    Error e = hpack_error_of(d, "3fe11f 82");
    EXPECT_THAT(e.message, HasSubstr("size update to at most 100"));
  }
  {
    HpackDecoder d;
    ASSERT_TRUE(d.decode(first));
    d.set_table_size_limit(100);
    d.set_table_size_limit(4096);
    auto r = d.decode(hex_bytes("3f45 3fe11f 82"));  // 100, then 4096
    ASSERT_TRUE(r) << r.error().to_string();
    EXPECT_EQ(d.table_capacity(), 4096u);
    EXPECT_EQ(d.dynamic_table(), (HeaderList{kAuthority}));  // 57 bytes fit in 100
    // Once signalled, the next block needs none.
    ASSERT_TRUE(d.decode(hex_bytes("be")));
  }
  {
    HpackDecoder d;  // a higher limit needs no update, and allows a larger table
    ASSERT_TRUE(d.decode(first));
    d.set_table_size_limit(8192);
    ASSERT_TRUE(d.decode(hex_bytes("be")));
    ASSERT_TRUE(d.decode(hex_bytes("3fe13f")));  // 8192
    EXPECT_EQ(d.table_capacity(), 8192u);
  }
}

// --- refusals --------------------------------------------------------------------------------

TEST(HpackDecoder, RefusesATruncatedInteger) {
  HpackDecoder d;
  Error e = hpack_error_of(d, "3f");  // a size update whose prefix says more bytes follow
  EXPECT_EQ(e.code, Errc::decode);
  EXPECT_EQ(e.message, "HPACK: integer truncated: the block ends inside it (at byte 0)");

  HpackDecoder d2;
  e = hpack_error_of(d2, "82 7f 80");  // a name index whose continuation byte says "more"
  EXPECT_THAT(e.message, HasSubstr("integer truncated: the block ends inside it (at byte 1)"));
}

TEST(HpackDecoder, RefusesAnIntegerThatOverflows32Bits) {
  HpackDecoder d;
  // An index of 127 + 127 + 127*2^7 + 127*2^14 + 127*2^21 + 15*2^28 = 2^32 + 126.
  Error e = hpack_error_of(d, "ff ff ff ff ff 0f");
  EXPECT_EQ(e.code, Errc::decode);
  EXPECT_EQ(e.message, "HPACK: integer overflow: larger than 2^32 - 1 (at byte 0)");

  HpackDecoder d2;  // small, but in more bytes than any 32-bit value needs
  e = hpack_error_of(d2, "82 ff 80 80 80 80 80 00");
  EXPECT_EQ(e.message, "HPACK: integer overflow: longer than any 32-bit value (at byte 1)");

  std::string max;
  hpack_encode_integer(max, 0, 7, 0xffffffffu);
  std::size_t pos = 0;
  auto v = hpack_decode_integer(max, pos, 7);
  ASSERT_TRUE(v) << v.error().to_string();
  EXPECT_EQ(*v, 0xffffffffu);
}

TEST(HpackDecoder, RefusesIndexZero) {
  HpackDecoder d;
  Error e = hpack_error_of(d, "82 80");
  EXPECT_EQ(e.code, Errc::decode);
  EXPECT_EQ(e.message, "HPACK: index 0, which is no table entry (at byte 1)");
}

TEST(HpackDecoder, RefusesAnIndexPastTheTable) {
  HpackDecoder d;
  ASSERT_TRUE(d.decode(hex_bytes("8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d")));
  Error e = hpack_error_of(d, "82 bf");  // 63: the table holds 61 + 1
  EXPECT_EQ(e.code, Errc::decode);
  EXPECT_EQ(e.message,
            "HPACK: index 63 is past the end of the table (61 static entries and 1 dynamic) "
            "(at byte 1)");

  HpackDecoder d2;  // as a literal's name
  e = hpack_error_of(d2, "7e 0161");
  EXPECT_EQ(e.message,
            "HPACK: index 62 is past the end of the table (61 static entries and 0 dynamic) "
            "(at byte 0)");
}

TEST(HpackDecoder, RefusesASizeUpdateAboveTheLimit) {
  HpackDecoder d;
  Error e = hpack_error_of(d, "3fe21f");  // 4097
  EXPECT_EQ(e.code, Errc::decode);
  EXPECT_EQ(e.message,
            "HPACK: dynamic table size update to 4097 is above the limit of 4096 "
            "(SETTINGS_HEADER_TABLE_SIZE) (at byte 0)");

  HpackDecoder d2;
  d2.set_table_size_limit(100);
  e = hpack_error_of(d2, "3f46");  // 101
  EXPECT_THAT(e.message, HasSubstr("update to 101 is above the limit of 100"));
}

TEST(HpackDecoder, RefusesASizeUpdateAfterAField) {
  HpackDecoder d;
  Error e = hpack_error_of(d, "82 20");
  EXPECT_EQ(e.code, Errc::decode);
  EXPECT_EQ(e.message,
            "HPACK: dynamic table size update after a header field (it may only start a block) "
            "(at byte 1)");
}

TEST(HpackDecoder, RefusesHuffmanPaddingThatIsNotAllOnes) {
  HpackDecoder d;
  // Name "a" (raw); value Huffman-coded, 1 byte: 00011 ("a") then 000.
  Error e = hpack_error_of(d, "00 0161 81 18");
  EXPECT_EQ(e.code, Errc::decode);
  EXPECT_EQ(e.message,
            "HPACK: Huffman-coded string ends in padding that is not all ones (at byte 4)");
}

TEST(HpackDecoder, RefusesHuffmanPaddingLongerThan7Bits) {
  HpackDecoder d;
  // 00011 ("a") then eleven ones: the start of EOS, but more than 7 bits of it.
  Error e = hpack_error_of(d, "00 0161 82 1fff");
  EXPECT_EQ(e.code, Errc::decode);
  EXPECT_EQ(e.message,
            "HPACK: Huffman-coded string ends in padding longer than 7 bits (11) (at byte 5)");

  HpackDecoder d2;  // a whole byte of ones and nothing else
  e = hpack_error_of(d2, "00 0161 81 ff");
  EXPECT_THAT(e.message, HasSubstr("padding longer than 7 bits (8) (at byte 4)"));
}

TEST(HpackDecoder, RefusesEosInAHuffmanString) {
  HpackDecoder d;
  // Thirty ones are EOS; it ends in the value's 4th byte, byte 7 of the block.
  Error e = hpack_error_of(d, "00 0161 84 ffffffff");
  EXPECT_EQ(e.code, Errc::decode);
  EXPECT_EQ(e.message, "HPACK: Huffman-coded string contains the EOS symbol (at byte 7)");

  HpackDecoder d2;  // mid-byte, after 00011 ("a"): 3 ones, 24, and 3 of byte 8
  e = hpack_error_of(d2, "00 0161 85 1fffffffff");
  EXPECT_THAT(e.message, HasSubstr("contains the EOS symbol (at byte 8)"));
}

TEST(HpackDecoder, RefusesAStringLongerThanTheBlock) {
  HpackDecoder d;
  Error e = hpack_error_of(d, "00 05 6162");
  EXPECT_EQ(e.code, Errc::decode);
  EXPECT_EQ(e.message,
            "HPACK: string literal of 5 bytes is longer than the rest of the block (2 bytes) "
            "(at byte 1)");

  HpackDecoder d2;  // a value whose length is missing altogether
  e = hpack_error_of(d2, "00 0161");
  EXPECT_EQ(e.message, "HPACK: string literal truncated: the block ends before it (at byte 3)");
}

TEST(HpackDecoder, RefusesAHeaderListOverTheLimit) {
  // name + value + 32 per field: "a" and 67 bytes is 100, which fits; 68 does not.
  {
    HpackDecoder d(100);
    std::string block = hex_bytes("00 0161 43") + std::string(67, 'v');
    ASSERT_TRUE(d.decode(block));
    block = hex_bytes("00 0161 44") + std::string(68, 'v');
    HpackDecoder d2(100);
    auto r = d2.decode(block);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, Errc::too_large);
    EXPECT_EQ(r.error().message,
              "HPACK: header list larger than 100 bytes (max_header_list_size; a field counts "
              "its name, its value and 32) (at byte 3)");
    EXPECT_TRUE(d2.failed());
  }
  {
    HpackDecoder d(100);  // the sum over fields: 3 x (":method" + "GET" + 32) = 126
    auto r = d.decode(hex_bytes("82 82 82"));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, Errc::too_large);
    EXPECT_THAT(r.error().message, HasSubstr("larger than 100 bytes"));
    EXPECT_THAT(r.error().message, HasSubstr("(at byte 2)"));
  }
  {
    // A Huffman-coded value stops as soon as it passes the limit: 67 symbols fit (100 - 32 - 1),
    // the 68th ends in bit 340 of the value, in its byte 42, byte 48 of the block (after 00,
    // 01 61 and the length ff f2 03).
    HpackDecoder d(100);
    auto r = d.decode(literal_with_huffman_value("a", std::string(1000, 'a')));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, Errc::too_large);
    EXPECT_THAT(r.error().message, HasSubstr("larger than 100 bytes"));
    EXPECT_THAT(r.error().message, HasSubstr("(at byte 48)"));
  }
  {
    HpackDecoder d(0);  // even an empty field is 32
    auto r = d.decode(hex_bytes("00 00 00"));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, Errc::too_large);
    ASSERT_TRUE(HpackDecoder(0).decode(""));
  }
}

TEST(HpackDecoder, OneByteFieldsRepeatingALargeEntryStopAtTheLimit) {
  // A 4,033-byte entry, then one byte per copy: 64 copies fit in 256 KiB, the 65th does not.
  HpackDecoder d;
  ASSERT_TRUE(d.decode(hex_bytes("40 0178 7f a11e") + std::string(4000, 'v')));
  ASSERT_EQ(d.table_size(), 4033u);
  auto r = d.decode(std::string(64, '\xbe'));
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(r->size(), 64u);
  r = d.decode(std::string(1000, '\xbe'));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::too_large);
  EXPECT_THAT(r.error().message, HasSubstr("larger than 262144 bytes"));
  EXPECT_THAT(r.error().message, HasSubstr("(at byte 64)"));
}

TEST(HpackDecoder, IsUnusableAfterAnError) {
  HpackDecoder d;
  ASSERT_FALSE(d.failed());
  Error e = hpack_error_of(d, "80");
  auto r = d.decode(hex_bytes("82"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::decode);
  EXPECT_EQ(r.error().message,
            "HPACK: decoder used after an error (its table may no longer match the peer's: a "
            "connection error); the error was: index 0, which is no table entry (at byte 0)");
  EXPECT_EQ(e.message, "HPACK: index 0, which is no table entry (at byte 0)");
  r = d.decode("");
  ASSERT_FALSE(r);
  EXPECT_TRUE(d.failed());
}

TEST(HpackDecoder, AnEmptyBlockIsAnEmptyList) {
  HpackDecoder d;
  auto r = d.decode("");
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_TRUE(r->empty());
}

// --- the request encoder ---------------------------------------------------------------------

TEST(HpackEncoder, WritesLiteralsWithoutIndexingAndStaticNameIndexes) {
  const std::string block = hpack_encode_request({{":method", "GET"},
                                                  {":path", "/api/v1/pods"},
                                                  {"Authorization", "Bearer t"},
                                                  {"X-Custom", "v"},
                                                  {"cookie", "c=1"},
                                                  {"User-Agent", "kinformer"}});
  EXPECT_EQ(block, hex_bytes("02 03 474554"                    // :method (2): GET
                             "04 0c 2f6170692f76312f706f6473"  // :path (4): /api/v1/pods
                             "1f08 08 4265617265722074"        // never indexed, 23: Bearer t
                             "00 08 782d637573746f6d 01 76"    // x-custom: v, new name
                             "1f11 03 633d31"                  // never indexed, cookie (32)
                             "0f2b 09 6b696e666f726d6572"));   // user-agent (58): kinformer
}

TEST(HpackEncoder, RoundTripsThroughTheDecoderLowerCasedAndLeavesNoTable) {
  std::string every_byte;
  for (int b = 0; b < 256; ++b) every_byte.push_back(static_cast<char>(b));
  const HeaderList request = {{":method", "POST"},
                              {":scheme", "https"},
                              {":authority", "10.0.0.1:6443"},
                              {":path", std::string(300, 'p')},  // a length past one byte
                              {"Content-Type", "application/vnd.kubernetes.protobuf"},
                              {"ACCEPT", "application/json"},
                              {"proxy-authorization", "Basic eDp5"},
                              {"x-empty", ""},
                              {"x-every-byte", every_byte},
                              {"X-Long-Name-" + std::string(200, 'N'), "v"}};
  HpackDecoder d;
  const std::string first = hpack_encode_request(request);
  for (int i = 0; i < 3; ++i) {  // stateless: the same bytes each time, decoded alike
    const std::string block = hpack_encode_request(request);
    EXPECT_EQ(block, first);
    auto r = d.decode(block);
    ASSERT_TRUE(r) << r.error().to_string();
    ASSERT_EQ(r->size(), request.size());
    for (std::size_t f = 0; f < request.size(); ++f) {
      std::string lower = request[f].name;
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      EXPECT_EQ((*r)[f].name, lower);
      EXPECT_EQ((*r)[f].value, request[f].value);
    }
    EXPECT_EQ(d.table_size(), 0u);
  }
  // The credentials are "never indexed" (0001xxxx), the others "without indexing" (0000xxxx).
  const std::string block = hpack_encode_request(
      {{"proxy-authorization", "x"}, {"AUTHORIZATION", "y"}, {"Cookie", "z"}, {"accept", "a"}});
  EXPECT_EQ(block, hex_bytes("1f22 0178 1f08 0179 1f11 017a 0f04 0161"));
}

TEST(HpackEncoder, StartsWithATableSizeUpdateWhenAsked) {
  const std::string block = hpack_encode_request({{":method", "GET"}}, 0);
  EXPECT_EQ(block, hex_bytes("20 0203474554"));
  HpackDecoder d;
  ASSERT_TRUE(d.decode(hex_bytes("4001610162")));
  d.set_table_size_limit(0);
  auto r = d.decode(block);
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(*r, (HeaderList{{":method", "GET"}}));
  EXPECT_EQ(hpack_encode_request({}, 4096), hex_bytes("3fe11f"));
  EXPECT_EQ(hpack_encode_request({}), "");
}

}  // namespace
}  // namespace kinformer::client
