// EventQueue (client/src/watch_stream.h): a watch's decoded events, oldest first, holding no
// memory while empty.

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "kinformer/client/dynamic_object.h"
#include "watch_stream.h"

namespace kinformer::client::detail {
namespace {

EventQueue::Queued event_named(int n) {
  auto object = std::make_shared<DynamicObject>();
  object->json = "e" + std::to_string(n);
  return {WatchEvent{EventType::added, object}, static_cast<std::size_t>(n)};
}

int take(EventQueue& queue) {
  EventQueue::Queued& front = queue.front();
  int n = static_cast<int>(front.bytes);
  EXPECT_EQ(static_cast<const DynamicObject&>(*front.event.object).json, "e" + std::to_string(n));
  WatchEvent event = std::move(front.event);
  queue.pop_front();
  return n;
}

TEST(EventQueueTest, HoldsNoMemoryWhileEmpty) {
  EventQueue queue;
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(queue.capacity(), 0U);
  queue.push_back(event_named(1));
  queue.push_back(event_named(2));
  EXPECT_EQ(queue.size(), 2U);
  EXPECT_GT(queue.capacity(), 0U);
  EXPECT_EQ(take(queue), 1);
  EXPECT_EQ(take(queue), 2);
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(queue.capacity(), 0U) << "an emptied queue keeps its slots";
}

TEST(EventQueueTest, KeepsOrderAcrossCompactions) {
  EventQueue queue;
  int pushed = 0;
  int taken = 0;
  // Push three, take two: the queue grows and never empties, so it compacts as it goes.
  for (int round = 0; round < 2000; ++round) {
    for (int i = 0; i < 3; ++i) queue.push_back(event_named(++pushed));
    for (int i = 0; i < 2; ++i) ASSERT_EQ(take(queue), ++taken);
  }
  EXPECT_EQ(queue.size(), 2000U);
  while (!queue.empty()) ASSERT_EQ(take(queue), ++taken);
  EXPECT_EQ(taken, pushed);
  EXPECT_EQ(queue.capacity(), 0U);
}

TEST(EventQueueTest, AQueueThatNeverEmptiesLetsGoOfTakenSlots) {
  // One event waits all along while 10,000 pass through: the slots stay about the compaction's
  // threshold (64), not the number that passed.
  EventQueue queue;
  int pushed = 0;
  int taken = 0;
  queue.push_back(event_named(++pushed));
  for (int i = 0; i < 10000; ++i) {
    queue.push_back(event_named(++pushed));
    ASSERT_EQ(take(queue), ++taken);
    ASSERT_EQ(queue.size(), 1U);
  }
  EXPECT_LE(queue.capacity(), 256U);
}

}  // namespace
}  // namespace kinformer::client::detail
