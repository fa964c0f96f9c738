// InternedString: equal texts share one pooled entry, the entry goes when its last holder does,
// values read like strings, and the pool is safe under concurrent interning and release. The
// typed decoders (JSON and protobuf) hand out shared strings for the fields that repeat.
#include "kinformer/client/interned_string.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "kinformer/client/pod.h"
#include "kinformer/client/protobuf.h"
#include "kinformer/client/secret.h"
#include "protobuf_samples.h"

namespace kinformer::client {
namespace {

TEST(InternedString, EqualTextsShareOneEntryUntilTheLastHolderGoes) {
  const std::size_t before = InternedString::pool_size();
  std::string text = "interned-test/share-" + std::to_string(before);  // a text no one else holds
  {
    InternedString a(text);
    InternedString b{std::string_view(text)};
    EXPECT_EQ(InternedString::pool_size(), before + 1);
    EXPECT_EQ(a.data(), b.data()) << "equal texts must share storage";
    EXPECT_EQ(&a.str(), &b.str());
    EXPECT_TRUE(a == b);
    InternedString c = a;  // a copy is the same entry
    EXPECT_EQ(c.data(), a.data());
    InternedString d = std::move(c);
    EXPECT_TRUE(c.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty
    EXPECT_EQ(d.data(), a.data());
    a = InternedString();
    b = InternedString();
    EXPECT_EQ(InternedString::pool_size(), before + 1) << "d still holds the entry";
    EXPECT_EQ(d, text);
  }
  EXPECT_EQ(InternedString::pool_size(), before) << "the last release must free the entry";
}

TEST(InternedString, EmptyHoldsNoEntryAndReadsAsEmpty) {
  const std::size_t before = InternedString::pool_size();
  InternedString e("");
  InternedString d;
  EXPECT_EQ(InternedString::pool_size(), before);
  EXPECT_TRUE(e.empty());
  EXPECT_EQ(e.size(), 0U);
  EXPECT_EQ(e, d);
  EXPECT_EQ(e, "");
  EXPECT_STREQ(e.c_str(), "");
}

TEST(InternedString, ReadsLikeAString) {
  InternedString s("kubernetes.io/service-name");
  const std::string& ref = s;
  std::string_view view = s;
  std::string copy = s;
  EXPECT_EQ(ref, "kubernetes.io/service-name");
  EXPECT_EQ(view, ref);
  EXPECT_EQ(copy, ref);
  EXPECT_EQ(s.size(), copy.size());
  EXPECT_TRUE(s.starts_with("kubernetes.io/"));
  EXPECT_TRUE(s.ends_with("-name"));
  EXPECT_TRUE(s == copy);
  EXPECT_TRUE(copy == s);
  EXPECT_TRUE(s == "kubernetes.io/service-name");
  EXPECT_FALSE(s == "kubernetes.io/service");
  EXPECT_TRUE(s != std::string_view("other"));
  EXPECT_LT(InternedString("a"), InternedString("b"));
  EXPECT_LT(InternedString("a"), "b");
  EXPECT_GT(InternedString("b"), std::string("a"));
  std::ostringstream os;
  os << s;
  EXPECT_EQ(os.str(), copy);
  std::map<std::string, int> by_name{{"kubernetes.io/service-name", 7}};
  EXPECT_EQ(by_name.at(s), 7);
  std::unordered_set<InternedString> set{s, InternedString(copy)};
  EXPECT_EQ(set.size(), 1U);
  EXPECT_EQ(std::hash<InternedString>{}(s), std::hash<std::string_view>{}(copy));
}

TEST(InternedString, SelfAssignmentKeepsTheValue) {
  InternedString s("interned-test/self");
  const InternedString& same = s;
  s = same;
  EXPECT_EQ(s, "interned-test/self");
  InternedString& alias = s;
  s = std::move(alias);
  EXPECT_EQ(s, "interned-test/self");
}

TEST(InternedString, UnpooledValuesStayOutOfThePoolAndCompareByText) {
  const std::size_t before = InternedString::pool_size();
  InternedString u = InternedString::unpooled("interned-test/unpooled");
  EXPECT_EQ(InternedString::pool_size(), before);
  InternedString copy = u;
  EXPECT_EQ(copy.data(), u.data());
  EXPECT_EQ(u, "interned-test/unpooled");
  InternedString pooled("interned-test/unpooled");
  EXPECT_EQ(InternedString::pool_size(), before + 1);
  EXPECT_TRUE(u == pooled);
  EXPECT_NE(u.data(), pooled.data());
  EXPECT_FALSE(u == InternedString("interned-test/other"));
}

// kubectl's last-applied-configuration annotation holds the whole manifest, a Secret's data
// included: long annotation values are never put in the shared pool (JSON and protobuf).
TEST(InternedString, LongAnnotationValuesOfASecretAreNotPooled) {
  const std::string applied =
      R"({\"apiVersion\":\"v1\",\"data\":{\"password\":\"c2VjcmV0LXZhbHVlLXVuaXF1ZQ==\"},\"kind\":\"Secret\"})";
  const std::size_t before = InternedString::pool_size();
  auto secret = testing::decode_json<Secret>(
      R"({"metadata":{"name":"s","namespace":"interned-test-ns","annotations":{"kubectl.kubernetes.io/last-applied-configuration":")" +
      applied + R"(","short":"interned-test-short"}},"data":{"password":"c2VjcmV0"}})");
  ASSERT_TRUE(secret);
  // Pooled: the namespace, the two annotation keys and the short value; not the long value.
  EXPECT_EQ(InternedString::pool_size(), before + 4);
  const std::string* v =
      find_value(secret->metadata.annotations, "kubectl.kubernetes.io/last-applied-configuration");
  ASSERT_NE(v, nullptr);
  EXPECT_NE(v->find("c2VjcmV0LXZhbHVlLXVuaXF1ZQ=="), std::string::npos);

  const std::string long_value(100, 'x');
  testing::Msg meta =
      testing::Msg()
          .str(1, "s")
          .str(3, "interned-test-ns")
          .entry(12, "kubectl.kubernetes.io/last-applied-configuration", long_value);
  auto pb = decode_protobuf_object(*protobuf_codec(ResourceTraits<Secret>::type()),
                                   testing::envelope("v1", "Secret", testing::Msg().msg(1, meta)));
  ASSERT_TRUE(pb) << pb.error().to_string();
  EXPECT_EQ(InternedString::pool_size(), before + 4) << "the protobuf decoder pooled a long value";
  EXPECT_EQ(*find_value(pb.value()->metadata.annotations,
                        "kubectl.kubernetes.io/last-applied-configuration"),
            long_value);
}

// Threads intern, copy and drop the same few texts at once: every value read is the text it was
// made from, and when all are gone the pool is back where it was (no entry freed while held, none
// leaked). TSan runs this in CI.
TEST(InternedString, ConcurrentInterningAndReleaseNeitherFreesAHeldEntryNorLeaks) {
  const std::size_t before = InternedString::pool_size();
  constexpr int kThreads = 4;
  constexpr int kRounds = 20000;
  const std::vector<std::string> texts = {"interned-test/c0", "interned-test/c1",
                                          "interned-test/c2", "interned-test/c3"};
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<InternedString> held;
      for (int i = 0; i < kRounds; ++i) {
        const std::string& text = texts[(i + t) % texts.size()];
        InternedString s(text);
        if (s != text) wrong.fetch_add(1);
        InternedString copy = s;
        if (copy.str() != text) wrong.fetch_add(1);
        // Hold some values across rounds, so both the last-release and the shared paths run.
        if (i % 3 == 0) held.push_back(std::move(copy));
        if (held.size() > 8) held.erase(held.begin());
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(InternedString::pool_size(), before);
}

// The decoders intern what repeats: two Pods of one workload share their label, owner, image and
// namespace strings, in both encodings; their own names and IPs are their own.
TEST(InternedString, DecodedPodsShareTheirRepeatedStrings) {
  auto a = testing::decode_json<Pod>(testing::pod_json("web-1", "1"));
  auto b = testing::decode_json<Pod>(testing::pod_json("web-2", "2"));
  ASSERT_TRUE(a && b);
  auto pb =
      decode_protobuf_object(*protobuf_codec(ResourceTraits<Pod>::type()),
                             testing::envelope("v1", "Pod", testing::pod_proto("web-3", "3")));
  ASSERT_TRUE(pb) << pb.error().to_string();
  const auto& c = dynamic_cast<const Pod&>(*pb.value());
  for (const Pod* other : {b.get(), &c}) {
    ASSERT_EQ(a->metadata.labels.size(), other->metadata.labels.size());
    for (std::size_t i = 0; i < a->metadata.labels.size(); ++i) {
      EXPECT_EQ(a->metadata.labels[i].first.data(), other->metadata.labels[i].first.data());
      EXPECT_EQ(a->metadata.labels[i].second.data(), other->metadata.labels[i].second.data());
    }
    EXPECT_EQ(a->metadata.namespace_.data(), other->metadata.namespace_.data());
    EXPECT_EQ(a->metadata.owner_references.at(0).name.data(),
              other->metadata.owner_references.at(0).name.data());
    EXPECT_EQ(a->containers.at(0).image.data(), other->containers.at(0).image.data());
    EXPECT_EQ(a->node_name.data(), other->node_name.data());
    EXPECT_EQ(a->conditions.at(1).type.data(), other->conditions.at(1).type.data());
    EXPECT_NE(a->metadata.name, other->metadata.name);
  }
}

}  // namespace
}  // namespace kinformer::client
