// The compact model fields: ByteMap (a Secret's data in one block), Timestamp (a metav1.Time in
// 8 bytes), Uid (a UUID in 16 bytes) and AddressList (an endpoint's addresses in one string).
// Each reads back exactly what the server sent, and the decoders fill them the same way from
// JSON and from protobuf.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <sstream>
#include <string>
#include <vector>

#include "json_decode.h"
#include "kinformer/client/endpoint_slice.h"
#include "kinformer/client/secret.h"

namespace kinformer::client {
namespace {

TEST(ByteMap, SortsByKeyAndTheLastOfEqualKeysWins) {
  ByteMap m(std::vector<std::pair<std::string, std::string>>{
      {"tls.key", "first"}, {"ca.crt", "ca"}, {"tls.key", "second"}, {"", "empty key"}});
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0], (ByteMap::Entry{"", "empty key"}));
  EXPECT_EQ(m[1], (ByteMap::Entry{"ca.crt", "ca"}));
  EXPECT_EQ(m[2], (ByteMap::Entry{"tls.key", "second"}));
  EXPECT_EQ(m.find("tls.key"), std::optional<std::string_view>("second"));
  EXPECT_EQ(m.find("ca.crt"), std::optional<std::string_view>("ca"));
  EXPECT_EQ(m.find("tls"), std::nullopt);
  EXPECT_EQ(m.find("zz"), std::nullopt);
  EXPECT_EQ(m.value_bytes(), std::string("empty key").size() + 2 + 6);
}

TEST(ByteMap, HoldsBinaryValuesAndEmptyOnes) {
  const std::string binary("a\0b\xff", 4);
  ByteMap m{{"bin", binary}, {"none", ""}};
  EXPECT_EQ(m.find("bin"), std::optional<std::string_view>(binary));
  EXPECT_EQ(m.find("none"), std::optional<std::string_view>(""));
  std::vector<std::string> keys;
  for (const auto& [k, v] : m) keys.emplace_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"bin", "none"}));
}

TEST(ByteMap, CopiesAreIndependentAndEqual) {
  ByteMap a{{"k", "value-1"}};
  ByteMap b = a;
  EXPECT_EQ(a, b);
  EXPECT_NE(a.find("k")->data(), b.find("k")->data()) << "a copy owns its own block";
  b = ByteMap{{"k", "value-2"}};
  EXPECT_NE(a, b);
  EXPECT_EQ(*a.find("k"), "value-1");
  ByteMap c = std::move(b);
  EXPECT_TRUE(b.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(*c.find("k"), "value-2");
  c = c;  // NOLINT: self-assignment keeps the value
  EXPECT_EQ(*c.find("k"), "value-2");
  EXPECT_EQ(ByteMap{}, ByteMap(std::vector<std::pair<std::string, std::string>>{}));
  // Maps whose byte totals leave padding in the block's last word compare by content only.
  EXPECT_EQ((ByteMap{{"a", "b"}}), (ByteMap{{"a", "b"}}));
  EXPECT_NE((ByteMap{{"a", "bc"}}), (ByteMap{{"ab", "c"}}));
}

TEST(ByteMap, PrintsKeysNeverValues) {
  ByteMap m{{"tls.key", "very-secret-bytes"}, {"ca.crt", "x"}};
  std::ostringstream os;
  os << m;
  EXPECT_EQ(os.str(), "{ca.crt, tls.key}");
  EXPECT_EQ(::testing::PrintToString(m).find("very-secret"), std::string::npos);
}

TEST(ByteMap, SecretDataFromJsonAndProtobufIsOneSortedMap) {
  auto r = decode<Secret>(
      R"({"metadata":{"name":"s","namespace":"ns"},"data":{"b":"Mg==","a":"MQ==","b":"Mw=="}})");
  ASSERT_TRUE(r) << r.error().to_string();
  const auto& s = dynamic_cast<const Secret&>(*r.value());
  ASSERT_EQ(s.data.size(), 2u);
  EXPECT_EQ(s.data[0], (ByteMap::Entry{"a", "1"}));
  EXPECT_EQ(s.data[1], (ByteMap::Entry{"b", "3"})) << "the last of a repeated key wins, as in Go";
}

TEST(Timestamp, ReadsRfc3339AndWritesItBackInUtc) {
  auto t = Timestamp::parse("2024-05-02T09:14:07Z");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->unix_seconds(), 1714641247);
  EXPECT_EQ(t->to_string(), "2024-05-02T09:14:07Z");
  EXPECT_EQ(Timestamp::parse("2024-05-02T11:14:07.123456+02:00"), t) << "offset and fraction";
  EXPECT_EQ(Timestamp::parse("2024-05-02t09:14:07z"), t);
  EXPECT_EQ(Timestamp::parse("1970-01-01T00:00:00Z")->unix_seconds(), 0);
  EXPECT_EQ(Timestamp::parse("0000-01-01T00:00:00Z")->unix_seconds(), Timestamp::kMinSeconds);
  EXPECT_EQ(Timestamp::parse("9999-12-31T23:59:59Z")->to_string(), "9999-12-31T23:59:59Z");
  EXPECT_EQ(Timestamp::parse("2024-02-29T00:00:00Z")->to_string(), "2024-02-29T00:00:00Z");
  EXPECT_LT(*Timestamp::parse("2024-05-02T09:14:07Z"), *Timestamp::parse("2024-05-02T09:14:08Z"));
}

TEST(Timestamp, RefusesWhatIsNotATime) {
  for (const char* bad : {"", "2024-05-02", "2024-05-02T09:14:07", "2024-05-02 09:14:07Z",
                          "2024-13-01T00:00:00Z", "2023-02-29T00:00:00Z", "2024-05-02T24:00:00Z",
                          "2024-05-02T09:60:00Z", "2024-05-02T09:14:60Z", "2024-05-02T09:14:07.Z",
                          "2024-05-02T09:14:07+0200", "2024-05-02T09:14:07Zjunk",
                          "9999-12-31T23:59:59-00:01", "0000-01-01T00:00:00+00:01", "yesterday"}) {
    EXPECT_FALSE(Timestamp::parse(bad)) << bad;
  }
  EXPECT_FALSE(Timestamp::from_unix_seconds(Timestamp::kMaxSeconds + 1));
  EXPECT_TRUE(Timestamp{}.empty());
  EXPECT_EQ(Timestamp{}.to_string(), "");
}

TEST(Timestamp, AJsonTimeThatIsNotRfc3339FailsTheObjectNamingTheField) {
  auto r = decode<Secret>(
      R"({"metadata":{"name":"s","namespace":"ns","creationTimestamp":"last tuesday"}})");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("metadata.creationTimestamp: not an RFC 3339 time"),
            std::string::npos)
      << r.error().message;
  auto unset = decode<Secret>(
      R"({"metadata":{"name":"s","namespace":"ns","creationTimestamp":null,"deletionTimestamp":""}})");
  ASSERT_TRUE(unset) << unset.error().to_string();
  EXPECT_TRUE(unset.value()->metadata.creation_timestamp.empty());
  EXPECT_FALSE(unset.value()->metadata.deletion_timestamp);
}

TEST(Uid, ACanonicalUuidIsHeldAsBytesAndReadsBackAsSent) {
  static_assert(sizeof(Uid) == 16, "a Uid is its 16 bytes");
  const std::string text = "0b6a3c1e-8f2d-4e7a-9c55-1d2e3f4a5b6c";
  Uid u(text);
  EXPECT_FALSE(u.empty());
  EXPECT_EQ(u.str(), text);
  EXPECT_TRUE(u == text);
  EXPECT_EQ(u, Uid(text));
  EXPECT_NE(u, Uid("0b6a3c1e-8f2d-4e7a-9c55-1d2e3f4a5b6d"));
  EXPECT_EQ(std::hash<Uid>{}(u), std::hash<Uid>{}(Uid(text)));
}

TEST(Uid, AnyOtherTextIsKeptAsSent) {
  for (const std::string text :
       {"uid-1", "0B6A3C1E-8F2D-4E7A-9C55-1D2E3F4A5B6C", "00000000-0000-0000-0000-000000000000",
        "0b6a3c1e-8f2d-4e7a-9c55-1d2e3f4a5b6", "0b6a3c1e-8f2d-4e7a-9c55-1d2e3f4a5b6cc",
        "0b6a3c1e8f2d-4e7a-9c55-1d2e3f4a5b6c-", "0b6a3c1e-8f2d-4e7a-9c55-1d2e3f4a5bxc"}) {
    Uid u(text);
    EXPECT_FALSE(u.empty()) << text;
    EXPECT_EQ(u.str(), text);
    EXPECT_NE(u, Uid("0b6a3c1e-8f2d-4e7a-9c55-1d2e3f4a5b6c")) << text;
  }
  EXPECT_TRUE(Uid().empty());
  EXPECT_TRUE(Uid("").empty());
  EXPECT_EQ(Uid().str(), "");
  // Not the RFC 4122 variant (10 in the top bits of byte 8): kept as text, read back as sent.
  EXPECT_EQ(Uid("0b6a3c1e-8f2d-4e7a-1c55-1d2e3f4a5b6c").str(),
            "0b6a3c1e-8f2d-4e7a-1c55-1d2e3f4a5b6c");
}

TEST(Uid, CopiesAndMovesKeepTheText) {
  Uid text("uid-1");
  Uid bytes("0b6a3c1e-8f2d-4e7a-9c55-1d2e3f4a5b6c");
  Uid a = text;
  Uid b = bytes;
  EXPECT_EQ(a, text);
  EXPECT_EQ(b, bytes);
  EXPECT_NE(a, b);
  a = b;
  EXPECT_EQ(a.str(), bytes.str());
  b = text;
  EXPECT_EQ(b.str(), "uid-1");
  Uid c = std::move(b);
  EXPECT_TRUE(b.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(c.str(), "uid-1");
  c = std::move(a);
  EXPECT_EQ(c.str(), bytes.str());
  c = c;  // NOLINT: self-assignment keeps the value
  EXPECT_EQ(c.str(), bytes.str());
}

TEST(AddressList, ReadsBackEveryAddressInOrder) {
  AddressList none;
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.size(), 0u);
  EXPECT_EQ(none.begin(), none.end());

  const std::string long_name(300, 'a');  // a length that takes two varint bytes
  AddressList list{"10.0.0.1", "", "fd00:10:244:1::1a", long_name};
  EXPECT_EQ(list.size(), 4u);
  EXPECT_EQ(list.front(), "10.0.0.1");
  EXPECT_EQ(list[1], "");
  EXPECT_EQ(list[2], "fd00:10:244:1::1a");
  EXPECT_EQ(list[3], long_name);
  EXPECT_EQ(list.to_vector(),
            (std::vector<std::string>{"10.0.0.1", "", "fd00:10:244:1::1a", long_name}));
  EXPECT_EQ(list, (AddressList{"10.0.0.1", "", "fd00:10:244:1::1a", long_name}));
  EXPECT_NE(list, (AddressList{"10.0.0.1", "", "fd00:10:244:1::1a"}));
  std::ostringstream os;
  os << AddressList{"10.0.0.1", "10.0.0.2"};
  EXPECT_EQ(os.str(), "[10.0.0.1, 10.0.0.2]");
}

TEST(AddressList, OneShortAddressLivesInTheListAndCopiesAreIndependent) {
  static_assert(sizeof(AddressList) == 24);
  AddressList v4{"255.255.255.255"};
  AddressList v6{"2001:db8:85a3::8a2e:370:7334", "10.0.0.1"};  // past 23 bytes: a heap block
  AddressList copy4 = v4;
  AddressList copy6 = v6;
  EXPECT_EQ(copy4, v4);
  EXPECT_EQ(copy6, v6);
  EXPECT_NE(copy6.front().data(), v6.front().data()) << "a copy owns its own block";
  copy4 = v6;
  EXPECT_EQ(copy4.to_vector(), v6.to_vector());
  copy6 = v4;
  EXPECT_EQ(copy6.to_vector(), (std::vector<std::string>{"255.255.255.255"}));
  AddressList moved = std::move(copy4);
  EXPECT_TRUE(copy4.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(moved.size(), 2u);
  moved.push_back("10.0.0.2");
  EXPECT_EQ(moved[2], "10.0.0.2");
  moved = std::move(copy6);
  EXPECT_EQ(moved.front(), "255.255.255.255");
  moved.clear();
  EXPECT_TRUE(moved.empty());
}

TEST(AddressList, SlicesFromJsonKeepEveryAddress) {
  auto r = decode<EndpointSlice>(
      R"({"metadata":{"name":"e","namespace":"ns"},"addressType":"IPv4",
          "endpoints":[{"addresses":["10.0.0.1","10.0.0.9"],
                        "targetRef":{"kind":"Pod","namespace":"ns","name":"p","uid":"0b6a3c1e-8f2d-4e7a-9c55-1d2e3f4a5b6c"}}]})");
  ASSERT_TRUE(r) << r.error().to_string();
  const auto& s = dynamic_cast<const EndpointSlice&>(*r.value());
  ASSERT_EQ(s.endpoints.size(), 1u);
  EXPECT_EQ(s.endpoints[0].addresses.to_vector(),
            (std::vector<std::string>{"10.0.0.1", "10.0.0.9"}));
  ASSERT_TRUE(s.endpoints[0].target_ref);
  EXPECT_EQ(s.endpoints[0].target_ref->uid.str(), "0b6a3c1e-8f2d-4e7a-9c55-1d2e3f4a5b6c");
  auto again = decode<EndpointSlice>(ResourceTraits<EndpointSlice>::type().codec->encode(s));
  ASSERT_TRUE(again) << again.error().to_string();
  EXPECT_EQ(dynamic_cast<const EndpointSlice&>(*again.value()).endpoints, s.endpoints);
}

}  // namespace
}  // namespace kinformer::client
