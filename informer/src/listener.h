#pragma once
// detail::Listener: one handler's coalescing queue, drained as a serial strand on the factory's
// HandlerExecutor (a bounded pool; never a thread per handler).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <boost/unordered/unordered_flat_set.hpp>

#include "detail/coalesce.h"
#include "kinformer/informer/clock.h"
#include "kinformer/informer/event_handler.h"
#include "kinformer/informer/handler_executor.h"
#include "kinformer/informer/metrics.h"

namespace kinformer::informer::detail {

/// The hash of an object's key (namespace and name), computed once per change for all handlers.
std::size_t key_hash(const client::ObjectMeta& meta) noexcept;

/// One change, recorded once for every handler of an informer. Its identity is `object`'s
/// namespace and name (a transform must keep them), hashed once (`hash` = key_hash()).
struct Delta {
  Notification::Kind kind = Notification::Kind::add;
  client::ObjectPtr old_object;  ///< update only
  client::ObjectPtr object;
  bool flag = false;  ///< add: is_initial_list; del: final_state_unknown
  std::size_t hash = 0;
};

/// Makes a Delta with its hash.
inline Delta make_delta(Notification::Kind kind, client::ObjectPtr old_object,
                        client::ObjectPtr object, bool flag) {
  std::size_t h = key_hash(object->metadata);
  return Delta{kind, std::move(old_object), std::move(object), flag, h};
}

/// Thread-safety: every public member may be called from any thread. Callbacks of one listener
/// never overlap (its strand is serial); enqueue() never waits for a callback.
class Listener : public std::enable_shared_from_this<Listener> {
 public:
  /// Most notifications one turn of the strand delivers before yielding its worker.
  static constexpr std::size_t kBatch = 64;

  /// `log`: the informer's logger (this listener adds handler and handler_id to its lines).
  /// `clock`: the informer's (enqueue() times are on it; the delivery lag is measured on it).
  Listener(ResourceEventHandlerPtr handler, std::string name, std::uint64_t id,
           std::shared_ptr<InformerMetrics> metrics, HandlerExecutorPtr executor,
           const client::Logger& log, ClockPtr clock);
  ~Listener();

  /// Creates the strand (and wakes it if notifications are already pending).
  void start();
  /// Coalesces a batch into the queue under one lock. Returns the strand to wake (null when
  /// nothing is pending or the listener is not started): the caller wakes it, once per batch,
  /// possibly together with other listeners' strands (HandlerExecutor::wake_all). The pointer
  /// stays valid while the caller holds this listener (the strand is set once, never reset).
  [[nodiscard]] HandlerExecutor::Strand* enqueue(std::span<const Delta> batch,
                                                 Clock::TimePoint enqueued);
  /// Every notification enqueued so far belongs to this handler's initial state.
  void mark_sync_barrier();
  /// Stops delivering: pending notifications are dropped, no callback starts after this returns
  /// (a running one finishes). Does not wait. Idempotent.
  void request_stop();
  /// After request_stop(): waits up to `timeout` until no callback of this handler runs; false
  /// (logged) if one still runs then. From inside this handler's own callback it returns at once.
  /// From inside another handler's callback it also returns, without waiting further, when this
  /// handler's running callback waits (in close(), directly or through other handlers) for the
  /// caller: handlers closing each other in a cycle never deadlock, and a chain of closes
  /// (A closes B while B closes a slow C) still waits for the end of the chain.
  bool join(std::chrono::milliseconds timeout);
  /// True when called from inside this handler's callback.
  [[nodiscard]] bool on_executor_thread() const;

  [[nodiscard]] bool has_synced() const;
  /// Waits until has_synced() or stopped, at most `timeout`; returns has_synced().
  bool wait_for_sync(std::chrono::milliseconds timeout) const;
  [[nodiscard]] bool closed() const;
  [[nodiscard]] std::size_t queue_depth() const;
  [[nodiscard]] std::uint64_t exceptions() const { return exceptions_.load(); }
  [[nodiscard]] std::uint64_t id() const noexcept { return id_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }

 private:
  static constexpr std::uint32_t kNone = UINT32_MAX;
  // The pending notifications of one key (never empty while the slot is in use). Slots live in
  // slots_ (reused through free_) and form a list, linked by index, in the order their key became
  // pending (seq ascending), so the oldest key is delivered first.
  // NOLINTNEXTLINE(bugprone-exception-escape): small_vector's noexcept move of Notifications
  struct Slot {
    std::uint64_t seq = 0;
    std::size_t hash = 0;
    PendingItems items;
    std::uint32_t prev = kNone;
    std::uint32_t next = kNone;
  };
  // The index of pending keys holds slot numbers: a key is read from the object its slot holds,
  // so no handler copies a key string, and the hash comes from the Delta.
  struct Probe {
    const client::ObjectMeta* meta;
    std::size_t hash;
  };
  struct SlotHash {
    using is_transparent = void;
    const std::vector<Slot>* slots;
    std::size_t operator()(std::uint32_t i) const noexcept { return (*slots)[i].hash; }
    std::size_t operator()(const Probe& p) const noexcept { return p.hash; }
  };
  struct SlotEq {
    using is_transparent = void;
    const std::vector<Slot>* slots;
    bool operator()(std::uint32_t a, std::uint32_t b) const noexcept { return a == b; }
    bool operator()(const Probe& p, std::uint32_t i) const noexcept;
    bool operator()(std::uint32_t i, const Probe& p) const noexcept { return (*this)(p, i); }
  };
  // Most slots kept allocated once the queue is empty; a burst (an initial list) beyond it is
  // returned, so idle handlers do not keep the memory of their largest backlog.
  static constexpr std::size_t kKeepSlots = 256;

  bool drain();  // one turn of the strand
  void deliver(const Notification& n);
  std::uint32_t new_slot();                                    // mu_ held
  void link_tail(std::uint32_t i);                             // mu_ held
  void unlink(std::uint32_t i);                                // mu_ held
  void check_synced();                                         // mu_ held
  void clear_pending();                                        // mu_ held
  void shrink_if_idle();                                       // mu_ held
  [[nodiscard]] bool waits_for(const Listener* target) const;  // wait-graph mutex held

  const ResourceEventHandlerPtr handler_;
  const std::string name_;
  const std::uint64_t id_;
  const client::Logger log_;
  const HandlerExecutorPtr executor_;
  const ClockPtr clock_;
  std::shared_ptr<InformerMetrics> informer_metrics_;
  std::unique_ptr<HandlerMetrics> metrics_;

  mutable std::mutex mu_;
  mutable std::condition_variable synced_cv_;  // synced_ became true, or stopped_
  std::vector<Slot> slots_;                    // guarded by mu_
  std::vector<std::uint32_t> free_;            // guarded by mu_
  boost::unordered_flat_set<std::uint32_t, SlotHash, SlotEq> index_;  // guarded by mu_
  std::uint32_t head_ = kNone;                                        // guarded by mu_
  std::uint32_t tail_ = kNone;                                        // guarded by mu_
  std::size_t depth_ = 0;                  // guarded by mu_: notifications pending
  std::uint64_t next_seq_ = 1;             // guarded by mu_
  std::optional<std::uint64_t> barrier_;   // guarded by mu_
  std::uint64_t in_flight_first_seq_ = 0;  // guarded by mu_ (0: no batch in flight)
  bool synced_ = false;                    // guarded by mu_
  bool in_turn_ = false;                   // guarded by mu_: drain() is delivering
  StrandPtr strand_;                       // guarded by mu_ (set once by start())
  std::atomic<bool> stopped_{false};       // written under mu_
  std::atomic<std::size_t> in_batch_{0};   // taken by the running turn, not yet delivered
  // The listener a callback of this one waits for in close(); guarded by listener.cc's process-
  // wide wait-graph mutex.
  const Listener* waiting_for_ = nullptr;
  std::atomic<std::uint64_t> exceptions_{0};
  std::vector<Notification> batch_;  // only touched by drain() (serial)
};

}  // namespace kinformer::informer::detail
