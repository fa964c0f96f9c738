#pragma once
// detail::Listener: one handler's coalescing queue, drained as a serial strand on the factory's
// HandlerExecutor (a bounded pool; never a thread per handler).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "detail/coalesce.h"
#include "kinformer/informer/event_handler.h"
#include "kinformer/informer/handler_executor.h"
#include "kinformer/informer/metrics.h"

namespace kinformer::informer::detail {

/// One change, recorded once for every handler of an informer: its key is computed once.
struct Delta {
  Notification::Kind kind = Notification::Kind::add;
  client::ObjectPtr old_object;  ///< update only
  client::ObjectPtr object;
  bool flag = false;  ///< add: is_initial_list; del: final_state_unknown
  std::string key;
};

/// Thread-safety: every public member may be called from any thread. Callbacks of one listener
/// never overlap (its strand is serial); enqueue() never waits for a callback.
class Listener : public std::enable_shared_from_this<Listener> {
 public:
  /// Most notifications one turn of the strand delivers before yielding its worker.
  static constexpr std::size_t kBatch = 64;

  Listener(ResourceEventHandlerPtr handler, std::string name, std::uint64_t id,
           std::shared_ptr<InformerMetrics> metrics, HandlerExecutorPtr executor);
  ~Listener();

  /// Creates the strand (and wakes it if notifications are already pending).
  void start();
  /// Coalesces a batch into the queue under one lock, then wakes the strand once.
  void enqueue(std::span<const Delta> batch, std::chrono::steady_clock::time_point enqueued);
  /// Every notification enqueued so far belongs to this handler's initial state.
  void mark_sync_barrier();
  /// Stops delivering: pending notifications are dropped, no callback starts after this returns
  /// (a running one finishes). Does not wait. Idempotent.
  void request_stop();
  /// After request_stop(): waits up to `timeout` until no callback of this handler runs; false
  /// (logged) if one still runs then. From inside this handler's own callback it returns at once.
  /// From inside another handler's callback it also returns, without waiting further, when this
  /// handler's running callback is itself blocked in a close(): two handlers closing each other
  /// never deadlock.
  bool join(std::chrono::milliseconds timeout);
  /// True when called from inside this handler's callback.
  [[nodiscard]] bool on_executor_thread() const;

  [[nodiscard]] bool has_synced() const;
  [[nodiscard]] bool closed() const;
  [[nodiscard]] std::size_t queue_depth() const;
  [[nodiscard]] std::uint64_t exceptions() const { return exceptions_.load(); }
  [[nodiscard]] std::uint64_t id() const noexcept { return id_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }

 private:
  // The pending notifications of one key; slots form a list in the order their key became
  // pending (seq ascending), so the oldest key is delivered first.
  struct Slot {
    std::uint64_t seq = 0;
    PendingItems items;
    const std::string* key = nullptr;  // the map's own key of this slot
    Slot* prev = nullptr;
    Slot* next = nullptr;
  };
  bool drain();  // one turn of the strand
  void deliver(const Notification& n);
  void link_tail(Slot* s);  // mu_ held
  void unlink(Slot* s);     // mu_ held
  void check_synced();      // mu_ held
  void clear_pending();     // mu_ held

  const ResourceEventHandlerPtr handler_;
  const std::string name_;
  const std::uint64_t id_;
  const HandlerExecutorPtr executor_;
  std::shared_ptr<InformerMetrics> informer_metrics_;
  std::unique_ptr<HandlerMetrics> metrics_;

  mutable std::mutex mu_;
  std::unordered_map<std::string, Slot> pending_;  // guarded by mu_
  Slot* head_ = nullptr;                           // guarded by mu_
  Slot* tail_ = nullptr;                           // guarded by mu_
  std::size_t depth_ = 0;                          // guarded by mu_: notifications pending
  std::uint64_t next_seq_ = 1;                     // guarded by mu_
  std::optional<std::uint64_t> barrier_;           // guarded by mu_
  std::uint64_t in_flight_first_seq_ = 0;          // guarded by mu_ (0: no batch in flight)
  bool synced_ = false;                            // guarded by mu_
  StrandPtr strand_;                               // guarded by mu_ (set once by start())
  std::atomic<bool> stopped_{false};               // written under mu_
  std::atomic<std::size_t> in_batch_{0};  // taken by the running turn, not yet delivered
  std::atomic<int> closing_others_{0};    // >0: a callback of this handler is inside close()
  std::atomic<std::uint64_t> exceptions_{0};
  std::vector<Notification> batch_;  // only touched by drain() (serial)
};

}  // namespace kinformer::informer::detail
