#pragma once
// The per-key coalescing rules of a handler's queue (SharedInformer::add_handler documents them;
// tests/informer/coalesce_test.cc checks every row).

#include <chrono>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "kinformer/client/object.h"

namespace kinformer::informer::detail {

/// One notification waiting for one handler.
struct Notification {
  enum class Kind { add, update, del };
  Kind kind = Kind::add;
  client::ObjectPtr old_object;  ///< update only
  client::ObjectPtr object;
  bool flag = false;  ///< add: is_initial_list; del: final_state_unknown
  std::chrono::steady_clock::time_point enqueued;
};

/// The pending notifications of one key: at most two, so they live inline.
using PendingItems = boost::container::small_vector<Notification, 2>;

/// Merges `n` into `items`, the notifications pending for one object key (oldest first), so
/// that `items` never holds more than two entries ([delete, add-or-update] at most):
///   (nothing)          + x           -> x
///   add                + update      -> add (latest state; initial flag and enqueue time kept)
///   add                + delete      -> nothing (the handler never saw the object)
///   update(a,b)        + update(b,c) -> update(a,c)
///   update(a,b)        + delete      -> delete (enqueue time of the update kept)
///   delete             + delete      -> delete (the first; duplicates dropped)
///   delete             + add/update  -> delete, then add (kept apart: the object was recreated)
/// Pure function; not thread-safe on one `items`. `Items`: PendingItems or std::vector.
template <typename Items>
void coalesce(Items& items, Notification n) {
  using K = Notification::Kind;
  if (items.empty()) {
    items.push_back(std::move(n));
    return;
  }
  Notification& last = items.back();
  switch (last.kind) {
    case K::add:
      if (n.kind == K::del) {
        items.pop_back();
      } else {
        last.object = std::move(n.object);
      }
      return;
    case K::update:
      if (n.kind == K::del) {
        n.enqueued = last.enqueued;
        last = std::move(n);
      } else {
        last.object = std::move(n.object);
      }
      return;
    case K::del:
      if (n.kind == K::del) return;
      n.kind = K::add;
      n.old_object.reset();
      items.push_back(std::move(n));
      return;
  }
}

}  // namespace kinformer::informer::detail
