#include "kinformer/cache/store.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "kinformer/cache/typed_store.h"
#include "kinformer/client/error.h"
#include "test_object.h"

namespace kinformer::cache {
namespace {

using testing::make_object;
using testing::payload_of;
using Type = StoreChange::Type;

std::vector<std::string> names(std::vector<client::ObjectPtr> objs) {
  std::vector<std::string> out;
  for (const auto& o : objs) out.push_back(o->key());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(StoreTest, AddUpdateDeleteReturnChanges) {
  Store s;
  auto c = s.upsert(make_object("ns", "a", "1"));
  EXPECT_EQ(c.type, Type::added);
  EXPECT_EQ(c.old_object, nullptr);
  auto v2 = make_object("ns", "a", "2");
  c = s.upsert(v2);
  EXPECT_EQ(c.type, Type::updated);
  EXPECT_EQ(c.old_object->metadata.resource_version, "1");
  EXPECT_EQ(s.get("ns/a"), v2);  // the same pointer: no copy
  auto d = s.remove("ns/a");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->type, Type::deleted);
  EXPECT_EQ(d->object, v2);
  EXPECT_FALSE(s.remove("ns/a").has_value());
  EXPECT_EQ(s.get("ns/a"), nullptr);
  EXPECT_EQ(s.size(), 0u);
}

// The store keeps no key string: an entry is found by hashing and comparing the object's
// namespace and name against the key as given ("ns/name", or "name" when cluster-scoped).
TEST(StoreTest, KeysAreMatchedAgainstNamespaceAndNameWithoutBuildingThem) {
  Store s;
  auto ab_c = make_object("ab", "c", "1");
  auto a_bc = make_object("a", "bc", "1");
  auto cluster = make_object("", "ab", "1");
  s.upsert(ab_c);
  s.upsert(a_bc);
  s.upsert(cluster);
  EXPECT_EQ(s.size(), 3u);
  EXPECT_EQ(s.get("ab/c"), ab_c);
  EXPECT_EQ(s.get("a/bc"), a_bc);
  EXPECT_EQ(s.get("ab"), cluster);
  for (const char* absent : {"a/b", "ab/", "/ab", "abc", "a/bcd", "ab/c/", "", "/"}) {
    EXPECT_EQ(s.get(absent), nullptr) << absent;
  }
  auto keys = s.keys();
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(keys, (std::vector<std::string>{"a/bc", "ab", "ab/c"}));
  auto v2 = make_object("a", "bc", "2");
  EXPECT_EQ(s.upsert(v2).type, Type::updated);
  EXPECT_EQ(s.get("a/bc"), v2);
  EXPECT_EQ(s.size(), 3u);
  EXPECT_TRUE(s.remove("ab"));
  EXPECT_EQ(s.get("ab"), nullptr);
  EXPECT_EQ(s.get("ab/c"), ab_c);
  // Names with a '/' (refused by the API server) still give one entry per key, as a key string
  // would: the last object under "x/y/z" replaces the others.
  Store odd;
  odd.upsert(make_object("x", "y/z", "1"));
  EXPECT_EQ(odd.upsert(make_object("x/y", "z", "2")).type, Type::updated);
  EXPECT_EQ(odd.upsert(make_object("", "x/y/z", "3")).type, Type::updated);
  EXPECT_EQ(odd.size(), 1u);
  EXPECT_EQ(odd.get("x/y/z")->metadata.resource_version, "3");
  // A relist with a repeated key keeps the last one.
  auto first = make_object("ns", "x", "1");
  auto last = make_object("ns", "x", "2");
  s.replace({first, last}, "9");
  EXPECT_EQ(s.size(), 1u);
  EXPECT_EQ(s.get("ns/x"), last);
}

TEST(StoreTest, ReplaceReportsAddsUpdatesAndDeletesWithLastState) {
  Store s;
  s.upsert(make_object("ns", "keep", "1"));
  s.upsert(make_object("ns", "gone", "5", {}, "last"));
  auto changes = s.replace({make_object("ns", "keep", "2"), make_object("ns", "new", "3")}, "10");
  EXPECT_EQ(s.resource_version(), "10");
  ASSERT_EQ(changes.size(), 3u);
  int added = 0, updated = 0, deleted = 0;
  for (const auto& ch : changes) {
    if (ch.type == Type::added) {
      ++added;
      EXPECT_EQ(ch.object->key(), "ns/new");
    } else if (ch.type == Type::updated) {
      ++updated;
      EXPECT_EQ(ch.old_object->metadata.resource_version, "1");
      EXPECT_EQ(ch.object->metadata.resource_version, "2");
    } else {
      ++deleted;
      EXPECT_EQ(ch.object->key(), "ns/gone");
      EXPECT_EQ(payload_of(ch.object), "last");
    }
  }
  EXPECT_EQ(added + updated + deleted, 3);
  EXPECT_EQ(deleted, 1);
  EXPECT_EQ(names(s.list()), (std::vector<std::string>{"ns/keep", "ns/new"}));
  EXPECT_EQ(names(s.list_namespace("ns")), (std::vector<std::string>{"ns/keep", "ns/new"}));
}

TEST(StoreTest, NamespaceAndSelectorQueries) {
  Store s;
  s.upsert(make_object("a", "x", "1", {{"app", "web"}}));
  s.upsert(make_object("a", "y", "1", {{"app", "db"}}));
  s.upsert(make_object("b", "z", "1", {{"app", "web"}}));
  s.upsert(make_object("", "cluster", "1"));
  EXPECT_EQ(names(s.list_namespace("a")), (std::vector<std::string>{"a/x", "a/y"}));
  EXPECT_EQ(names(s.list(LabelSelector::parse("app=web"))),
            (std::vector<std::string>{"a/x", "b/z"}));
  EXPECT_EQ(names(s.list("a", LabelSelector::parse("app in (web)"))),
            (std::vector<std::string>{"a/x"}));
  EXPECT_EQ(names(s.list(LabelSelector::parse("!app"))), (std::vector<std::string>{"cluster"}));
  // Moving labels keeps queries right.
  s.upsert(make_object("a", "y", "2", {{"app", "web"}}));
  EXPECT_EQ(names(s.list("a", LabelSelector::parse("app=web"))),
            (std::vector<std::string>{"a/x", "a/y"}));
}

TEST(StoreTest, CustomIndexAddedLaterIndexesExistingContents) {
  Store s;
  s.upsert(make_object("a", "x", "1", {{"secret", "s1"}}));
  s.upsert(make_object("a", "y", "1", {{"secret", "s2"}}));
  auto by_secret = [](const client::Object& o) {
    const std::string* v = client::find_value(o.metadata.labels, "secret");
    return v ? std::vector<std::string>{*v} : std::vector<std::string>{};
  };
  s.add_index("secret", by_secret);
  EXPECT_THROW(s.add_index("secret", by_secret), client::ConfigError);
  EXPECT_THROW((void)s.by_index("nope", "x"), client::ConfigError);
  EXPECT_EQ(names(s.by_index("secret", "s1")), (std::vector<std::string>{"a/x"}));
  s.upsert(make_object("a", "z", "1", {{"secret", "s1"}}));
  s.upsert(make_object("a", "x", "2", {{"secret", "s2"}}));
  EXPECT_EQ(names(s.by_index("secret", "s1")), (std::vector<std::string>{"a/z"}));
  EXPECT_EQ(names(s.by_index("secret", "s2")), (std::vector<std::string>{"a/x", "a/y"}));
  (void)s.remove("a/z");
  EXPECT_TRUE(s.by_index("secret", "s1").empty());
  auto values = s.index_values("secret");
  EXPECT_EQ(values, (std::vector<std::string>{"s2"}));
}

// The indexes refer to the store's entries rather than copying keys: after a replace() (which
// swaps in a new map) and removals they must name exactly the objects held now, with their
// latest state.
TEST(StoreTest, IndexesFollowReplaceAndRemove) {
  Store s;
  auto by_secret = [](const client::Object& o) {
    const std::string* v = client::find_value(o.metadata.labels, "secret");
    return v ? std::vector<std::string>{*v} : std::vector<std::string>{};
  };
  s.add_index("secret", by_secret);
  s.upsert(make_object("a", "x", "1", {{"secret", "s1"}}));
  s.upsert(make_object("b", "gone", "1", {{"secret", "s1"}}));
  (void)s.replace({make_object("a", "x", "2", {{"secret", "s2"}}),
                   make_object("a", "y", "2", {{"secret", "s1"}}),
                   make_object("b", "z", "2", {{"secret", "s1"}})},
                  "2");
  EXPECT_EQ(names(s.by_index("secret", "s1")), (std::vector<std::string>{"a/y", "b/z"}));
  auto x = s.by_index("secret", "s2");
  ASSERT_EQ(x.size(), 1U);
  EXPECT_EQ(x[0]->metadata.resource_version, "2");
  EXPECT_EQ(names(s.list_namespace("b")), (std::vector<std::string>{"b/z"}));
  (void)s.remove("b/z");
  (void)s.remove("a/x");
  EXPECT_EQ(names(s.by_index("secret", "s1")), (std::vector<std::string>{"a/y"}));
  EXPECT_TRUE(s.by_index("secret", "s2").empty());
  EXPECT_TRUE(s.list_namespace("b").empty());
  EXPECT_EQ(s.index_values("secret"), (std::vector<std::string>{"s1"}));
  s.upsert(make_object("a", "y", "3", {{"secret", "s2"}}));  // an update moves it
  EXPECT_TRUE(s.by_index("secret", "s1").empty());
  auto y = s.by_index("secret", "s2");
  ASSERT_EQ(y.size(), 1U);
  EXPECT_EQ(y[0]->metadata.resource_version, "3");
}

TEST(StoreTest, TypedStoreCastsWithoutCopy) {
  auto s = std::make_shared<Store>();
  auto obj = make_object("a", "x", "1", {}, "hello");
  s->upsert(obj);
  TypedStore<testing::TestObject> typed(s);
  auto got = typed.get("a/x");
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->payload, "hello");
  EXPECT_EQ(static_cast<const void*>(got.get()), static_cast<const void*>(obj.get()));
  EXPECT_EQ(typed.list().size(), 1u);
  EXPECT_EQ(typed.get("a/none"), nullptr);
}

}  // namespace
}  // namespace kinformer::cache
