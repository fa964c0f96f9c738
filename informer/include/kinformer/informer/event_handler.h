#pragma once
// The handler interface informers notify.

#include <functional>
#include <memory>
#include <string>

#include "kinformer/client/object.h"

namespace kinformer::informer {

/// Receives an informer's notifications, always after the store was updated.
///
/// Threading: each registered handler runs as a serial strand on its factory's HandlerExecutor
/// (a bounded worker pool; threads are O(pool), never O(handlers)): calls to one handler never
/// overlap and are in order per object key; different handlers run concurrently. A callback that
/// blocks longer than the pool's blocking threshold no longer counts against the pool (a
/// replacement worker takes its place, up to a cap), so it delays no other handler. Exceptions
/// thrown by a callback are caught and counted (metric `kinformer_handler_exceptions_total`) and
/// never stop the handler.
class ResourceEventHandler {
 public:
  virtual ~ResourceEventHandler() = default;
  /// An object appeared. `is_initial_list` is true for the informer's initial list, and for the
  /// synthetic adds a handler registered after start receives for the current contents.
  virtual void on_add(const client::ObjectPtr& object, bool is_initial_list) = 0;
  /// An object changed (or a resync: old == new).
  virtual void on_update(const client::ObjectPtr& old_object,
                         const client::ObjectPtr& new_object) = 0;
  /// An object was deleted. `object` is its final state as sent by the server, or — when
  /// `final_state_unknown` is true — the last state the cache knew (a tombstone: the object
  /// vanished from a relist, so the delete itself was missed).
  virtual void on_delete(const client::ObjectPtr& object, bool final_state_unknown) = 0;
};

using ResourceEventHandlerPtr = std::shared_ptr<ResourceEventHandler>;

/// A handler from std::functions; unset members ignore the notification.
struct ResourceEventHandlerFuncs final : ResourceEventHandler {
  std::function<void(const client::ObjectPtr&, bool)> add;
  std::function<void(const client::ObjectPtr&, const client::ObjectPtr&)> update;
  std::function<void(const client::ObjectPtr&, bool)> del;

  void on_add(const client::ObjectPtr& o, bool initial) override {
    if (add) add(o, initial);
  }
  void on_update(const client::ObjectPtr& o, const client::ObjectPtr& n) override {
    if (update) update(o, n);
  }
  void on_delete(const client::ObjectPtr& o, bool unknown) override {
    if (del) del(o, unknown);
  }
};

/// Per-registration options.
struct HandlerOptions {
  /// Names the handler in metrics (label "handler") and logs. Keep it bounded (a component name);
  /// empty: "handler-<n>".
  std::string name;
};

}  // namespace kinformer::informer
