#pragma once
// Private: threads for the calls a reflector has to block in (a list; opening a watch; reading a
// stream that cannot say when it is ready, e.g. a test's fake; a wait on an injected clock), so
// that the reflector itself runs on a shared runtime and holds no thread while it watches.
// Threads are made when every one is busy and leave after kIdle without work: a process whose
// reflectors all watch holds none of them.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>

namespace kinformer::informer::detail {

class BlockingPool {
 public:
  static constexpr std::chrono::seconds kIdle{2};

  /// The process's pool (never destroyed: its threads may outlive static destruction).
  static BlockingPool& instance();

  /// Runs `job` on a pool thread (an idle one, else a new one), then `then` on the same thread,
  /// which by then counts as idle: a job that `then` leads to (a caller resumed by it submits
  /// its next call) finds this thread instead of making another. Neither may throw.
  void submit(std::function<void()> job, std::function<void()> then = {});
  /// Threads alive now (busy or idle).
  [[nodiscard]] std::size_t threads() const;
  /// Threads running a job now.
  [[nodiscard]] std::size_t busy() const;
  /// Makes the idle threads leave now, and waits until they have.
  void trim();

 private:
  BlockingPool() = default;
  void work();

  mutable std::mutex mu_;
  std::condition_variable cv_;       // a job, or trim
  std::condition_variable gone_cv_;  // a thread left
  struct Job {
    std::function<void()> work;
    std::function<void()> then;
  };
  std::deque<Job> jobs_;
  std::size_t threads_ = 0;
  std::size_t idle_ = 0;
  std::size_t trim_ = 0;  // idle threads asked to leave
};

}  // namespace kinformer::informer::detail
