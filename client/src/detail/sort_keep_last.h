#pragma once
// Private: sorts (key, value) pairs by key and keeps the last of each run of equal keys (Go's
// rule for a JSON object or a protobuf map that repeats a key).

#include <algorithm>
#include <iterator>
#include <utility>

namespace kinformer::client::detail {

template <typename Pairs>
void sort_keep_last(Pairs& pairs) {
  std::stable_sort(pairs.begin(), pairs.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  auto out = pairs.begin();
  for (auto it = pairs.begin(); it != pairs.end(); ++it) {
    auto next = std::next(it);
    if (next != pairs.end() && next->first == it->first) continue;
    if (out != it) *out = std::move(*it);
    ++out;
  }
  pairs.erase(out, pairs.end());
}

}  // namespace kinformer::client::detail
