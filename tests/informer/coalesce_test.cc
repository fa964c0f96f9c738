// Every row of the coalescing table in detail/coalesce.h (and SharedInformer::add_handler).
#include "detail/coalesce.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../cache/test_object.h"

namespace kinformer::informer::detail {
namespace {

using K = Notification::Kind;
using Clock = std::chrono::steady_clock;

// An input: kind, resourceVersion of the object (and of the old object for an update), flag,
// enqueue time in ticks.
struct In {
  K kind;
  std::string rv;
  std::string old_rv;
  bool flag = false;
  int at = 0;
};

Notification make(const In& in) {
  Notification n;
  n.kind = in.kind;
  n.object = testing::make_object("ns", "a", in.rv);
  if (!in.old_rv.empty()) n.old_object = testing::make_object("ns", "a", in.old_rv);
  n.flag = in.flag;
  n.enqueued = Clock::time_point(Clock::duration(in.at));
  return n;
}

// "add 3 initial @0", "update 1->3 @1", "delete 4 unknown @2".
std::string describe(const Notification& n) {
  std::string s;
  switch (n.kind) {
    case K::add:
      s = "add " + n.object->metadata.resource_version;
      break;
    case K::update:
      s = "update " + (n.old_object ? n.old_object->metadata.resource_version : std::string("?")) +
          "->" + n.object->metadata.resource_version;
      break;
    case K::del:
      s = "delete " + n.object->metadata.resource_version;
      break;
  }
  if (n.flag) s += n.kind == K::add ? " initial" : " unknown";
  if (n.kind == K::add && n.old_object) s += " (stale old object)";
  s += " @" + std::to_string(n.enqueued.time_since_epoch().count());
  return s;
}

struct Row {
  const char* rule;
  std::vector<In> inputs;
  std::vector<std::string> want;
};

class CoalesceTable : public ::testing::TestWithParam<Row> {};

TEST_P(CoalesceTable, Rule) {
  const Row& row = GetParam();
  std::vector<Notification> items;
  for (const In& in : row.inputs) {
    coalesce(items, make(in));
    EXPECT_LE(items.size(), 2u) << row.rule << ": never more than two entries per key";
  }
  std::vector<std::string> got;
  for (const auto& n : items) got.push_back(describe(n));
  EXPECT_EQ(got, row.want) << row.rule;
}

INSTANTIATE_TEST_SUITE_P(
    EveryRule, CoalesceTable,
    ::testing::Values(
        Row{"first notification is kept as is",
            {{K::update, "2", "1", false, 5}},
            {"update 1->2 @5"}},
        Row{"add + update -> add of the latest state, initial flag and time kept",
            {{K::add, "1", "", true, 1}, {K::update, "2", "1", false, 2}},
            {"add 2 initial @1"}},
        Row{"add + update + update -> one add",
            {{K::add, "1", "", false, 1},
             {K::update, "2", "1", false, 2},
             {K::update, "3", "2", false, 3}},
            {"add 3 @1"}},
        Row{"add + delete -> nothing",
            {{K::add, "1", "", true, 1}, {K::del, "2", "", false, 2}},
            {}},
        Row{"update(a,b) + update(b,c) -> update(a,c), first time kept",
            {{K::update, "2", "1", false, 1}, {K::update, "3", "2", false, 2}},
            {"update 1->3 @1"}},
        Row{"update + delete -> delete only, with the update's time",
            {{K::update, "2", "1", false, 1}, {K::del, "3", "", true, 2}},
            {"delete 3 unknown @1"}},
        Row{"delete + delete -> the first delete",
            {{K::del, "2", "", false, 1}, {K::del, "3", "", true, 2}},
            {"delete 2 @1"}},
        Row{"delete + add -> delete, then add (recreated)",
            {{K::del, "2", "", false, 1}, {K::add, "3", "", false, 2}},
            {"delete 2 @1", "add 3 @2"}},
        Row{"delete + update -> delete, then an add without the stale old object",
            {{K::del, "2", "", false, 1}, {K::update, "3", "2", false, 2}},
            {"delete 2 @1", "add 3 @2"}},
        Row{"delete + add + update -> delete, then add of the latest",
            {{K::del, "2", "", false, 1},
             {K::add, "3", "", false, 2},
             {K::update, "4", "3", false, 3}},
            {"delete 2 @1", "add 4 @2"}},
        Row{"delete + add + delete -> the delete alone",
            {{K::del, "2", "", false, 1}, {K::add, "3", "", false, 2}, {K::del, "4", "", false, 3}},
            {"delete 2 @1"}},
        Row{"update + delete + add -> delete, then add",
            {{K::update, "2", "1", false, 1},
             {K::del, "3", "", false, 2},
             {K::add, "4", "", false, 3}},
            {"delete 3 @1", "add 4 @3"}}),
    [](const ::testing::TestParamInfo<Row>& info) { return "row" + std::to_string(info.index); });

// The bound the table exists for: any sequence, however long, leaves at most two entries.
TEST(Coalesce, AnySequenceStaysWithinTwoEntries) {
  std::vector<Notification> items;
  const K kinds[] = {K::add, K::update, K::del};
  unsigned x = 12345;
  for (int i = 0; i < 10000; ++i) {
    x = x * 1103515245u + 12345u;
    K k = kinds[(x >> 16) % 3];
    coalesce(items, make({k, std::to_string(i + 2), k == K::update ? std::to_string(i + 1) : "",
                          false, i}));
    ASSERT_LE(items.size(), 2u) << "after input " << i;
    if (items.size() == 2) {
      EXPECT_EQ(items[0].kind, K::del);
      EXPECT_EQ(items[1].kind, K::add);
    }
  }
}

}  // namespace
}  // namespace kinformer::informer::detail
