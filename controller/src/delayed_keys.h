#pragma once
// DelayedKeys: the keys added with a delay, each with the time it is due (client-go's
// waitingForQueue in util/workqueue/delaying_queue.go).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kinformer/informer/clock.h"

namespace kinformer::controller::detail {

/// One entry per key: a key added again while it waits keeps the earlier of its two due times
/// (an earlier due replaces a later one; a later due is dropped). Keys come out in due order,
/// keys due at the same time in the order they were added.
/// Not thread-safe: WorkQueue holds its lock around every call.
class DelayedKeys {
 public:
  using TimePoint = informer::Clock::TimePoint;

  /// Returns true when `key` was not waiting or is now due earlier than before.
  bool add(const std::string& key, TimePoint due);
  /// The earliest due time; nullopt when no key waits.
  [[nodiscard]] std::optional<TimePoint> earliest() const;
  /// Removes and returns the keys due at or before `now`, earliest first.
  std::vector<std::string> take_due(TimePoint now);
  [[nodiscard]] std::size_t size() const noexcept { return due_of_.size(); }
  [[nodiscard]] bool empty() const noexcept { return due_of_.empty(); }
  void clear();

 private:
  using Slot = std::pair<TimePoint, std::uint64_t>;  // due, then the order of adding
  std::map<Slot, std::string> by_due_;
  std::unordered_map<std::string, Slot> due_of_;
  std::uint64_t next_seq_ = 0;
};

}  // namespace kinformer::controller::detail
