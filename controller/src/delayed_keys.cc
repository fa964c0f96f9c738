#include "delayed_keys.h"

namespace kinformer::controller::detail {

bool DelayedKeys::add(const std::string& key, TimePoint due) {
  auto it = due_of_.find(key);
  if (it != due_of_.end()) {
    if (due >= it->second.first) return false;  // the earlier due stays
    by_due_.erase(it->second);
    it->second = Slot{due, next_seq_++};
    by_due_.emplace(it->second, key);
    return true;
  }
  Slot slot{due, next_seq_++};
  due_of_.emplace(key, slot);
  by_due_.emplace(slot, key);
  return true;
}

std::optional<DelayedKeys::TimePoint> DelayedKeys::earliest() const {
  if (by_due_.empty()) return std::nullopt;
  return by_due_.begin()->first.first;
}

std::vector<std::string> DelayedKeys::take_due(TimePoint now) {
  std::vector<std::string> due;
  while (!by_due_.empty() && by_due_.begin()->first.first <= now) {
    auto node = by_due_.extract(by_due_.begin());
    due_of_.erase(node.mapped());
    due.push_back(std::move(node.mapped()));
  }
  return due;
}

void DelayedKeys::clear() {
  by_due_.clear();
  due_of_.clear();
}

}  // namespace kinformer::controller::detail
