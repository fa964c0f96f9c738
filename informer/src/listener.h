#pragma once
// detail::Listener: one handler's coalescing queue and serial executor (its own thread).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kinformer/informer/event_handler.h"
#include "kinformer/informer/metrics.h"
#include "detail/coalesce.h"

namespace kinformer::informer::detail {

/// Thread-safety: enqueue/mark_sync_barrier/stop/accessors are thread-safe.
class Listener : public std::enable_shared_from_this<Listener> {
 public:
  Listener(ResourceEventHandlerPtr handler, std::string name, std::uint64_t id,
           std::shared_ptr<InformerMetrics> metrics);
  ~Listener();

  /// Spawns the executor thread.
  void start();
  void enqueue(Notification n);
  /// Every notification enqueued so far belongs to this handler's initial state.
  void mark_sync_barrier();
  /// Stops delivering; pending notifications are dropped. Does not wait.
  void request_stop();
  /// Waits up to `timeout` for the executor to exit, then joins it (or detaches it, logged).
  /// Must not be called from the executor thread.
  void join(std::chrono::milliseconds timeout);
  [[nodiscard]] bool on_executor_thread() const;
  [[nodiscard]] bool exited() const;

  [[nodiscard]] bool has_synced() const;
  [[nodiscard]] bool closed() const;
  [[nodiscard]] std::size_t queue_depth() const;
  [[nodiscard]] std::uint64_t exceptions() const { return exceptions_.load(); }
  [[nodiscard]] std::uint64_t id() const noexcept { return id_; }

 private:
  struct Pending {
    std::uint64_t seq = 0;
    std::vector<Notification> items;  // at most two: [delete, add/update]
  };
  void run(std::stop_token stop);
  void deliver(const Notification& n);
  void check_synced();  // mu_ held
  void update_depth();  // mu_ held

  const ResourceEventHandlerPtr handler_;
  const std::string name_;
  const std::uint64_t id_;
  std::shared_ptr<InformerMetrics> informer_metrics_;
  std::unique_ptr<HandlerMetrics> metrics_;

  mutable std::mutex mu_;
  std::condition_variable_any cv_;
  std::map<std::uint64_t, std::string> order_;         // guarded by mu_: seq -> key
  std::unordered_map<std::string, Pending> pending_;   // guarded by mu_
  std::size_t depth_ = 0;                              // guarded by mu_: notifications pending
  std::uint64_t next_seq_ = 1;                         // guarded by mu_
  std::optional<std::uint64_t> barrier_;               // guarded by mu_
  std::uint64_t in_flight_seq_ = 0;                    // guarded by mu_ (0: none)
  bool synced_ = false;                                // guarded by mu_
  bool stopped_ = false;                               // guarded by mu_
  bool exited_ = false;                                // guarded by mu_
  std::atomic<std::uint64_t> exceptions_{0};
  std::thread::id thread_id_;                          // guarded by mu_
  std::mutex join_mu_;  // serialises join()/detach of thread_
  std::jthread thread_;  // started in start(); joined or detached under join_mu_
};

}  // namespace kinformer::informer::detail
