// DelayedKeys: one entry per key, the earlier due wins, keys come out in due order.
#include "delayed_keys.h"

#include <gtest/gtest.h>

namespace kinformer::controller::detail {
namespace {

using std::chrono::seconds;
using TimePoint = DelayedKeys::TimePoint;
const TimePoint t0{std::chrono::hours(1)};

TEST(DelayedKeysTest, AnEarlierDueReplacesALaterOne) {
  DelayedKeys keys;
  EXPECT_TRUE(keys.add("a", t0 + seconds(10)));
  EXPECT_TRUE(keys.add("a", t0 + seconds(5)));
  EXPECT_EQ(keys.size(), 1u);
  EXPECT_EQ(keys.earliest(), t0 + seconds(5));
  EXPECT_EQ(keys.take_due(t0 + seconds(5)), std::vector<std::string>{"a"});
  EXPECT_TRUE(keys.empty());
  EXPECT_TRUE(keys.take_due(t0 + seconds(10)).empty());  // the later due is gone with it
}

TEST(DelayedKeysTest, ALaterDueIsDropped) {
  DelayedKeys keys;
  EXPECT_TRUE(keys.add("a", t0 + seconds(5)));
  EXPECT_FALSE(keys.add("a", t0 + seconds(10)));
  EXPECT_FALSE(keys.add("a", t0 + seconds(5)));
  EXPECT_EQ(keys.size(), 1u);
  EXPECT_EQ(keys.earliest(), t0 + seconds(5));
}

TEST(DelayedKeysTest, KeysComeOutInDueOrderAndTiesInTheOrderAdded) {
  DelayedKeys keys;
  keys.add("late", t0 + seconds(3));
  keys.add("tie-1", t0 + seconds(2));
  keys.add("early", t0 + seconds(1));
  keys.add("tie-2", t0 + seconds(2));
  keys.add("never", t0 + seconds(9));
  EXPECT_TRUE(keys.take_due(t0).empty());
  EXPECT_EQ(keys.take_due(t0 + seconds(3)),
            (std::vector<std::string>{"early", "tie-1", "tie-2", "late"}));
  EXPECT_EQ(keys.earliest(), t0 + seconds(9));
  keys.clear();
  EXPECT_TRUE(keys.empty());
  EXPECT_EQ(keys.earliest(), std::nullopt);
}

}  // namespace
}  // namespace kinformer::controller::detail
