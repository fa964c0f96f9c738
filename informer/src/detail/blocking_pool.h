#pragma once
// Private: threads for the calls a reflector has to block in (a list; opening a watch; reading a
// stream that cannot say when it is ready, e.g. a test's fake; a wait on an injected clock), so
// that the reflector itself runs on a shared runtime and holds no thread while it watches.
// Threads are made when every one is busy and leave after kIdle without work: a process whose
// reflectors all watch holds none of them.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>

namespace kinformer::informer::detail {

class BlockingPool {
 public:
  static constexpr std::chrono::seconds kIdle{2};
  /// Starts a thread running `body`, detached; throws (as std::thread does) if it cannot.
  using Starter = std::function<void(std::function<void()> body)>;

  /// The process's pool (never destroyed: its threads may outlive static destruction).
  static BlockingPool& instance();

  /// A pool of its own (tests): `start` makes its threads. Destruction waits for them to leave,
  /// so it must not outlive what a running job waits for (a fake stream's next event).
  explicit BlockingPool(Starter start);
  ~BlockingPool();
  BlockingPool(const BlockingPool&) = delete;
  BlockingPool& operator=(const BlockingPool&) = delete;

  /// Runs `job` on a pool thread (an idle one, else a new one), then `then` on the same thread,
  /// which by then counts as idle: a job that `then` leads to (a caller resumed by it submits
  /// its next call) finds this thread instead of making another. Neither may throw.
  /// False, with nothing run or kept, when no thread could be started for it (the caller tries
  /// again later).
  [[nodiscard]] bool submit(std::function<void()> job, std::function<void()> then = {});
  /// Threads alive now (busy or idle).
  [[nodiscard]] std::size_t threads() const;
  /// Threads running a job now.
  [[nodiscard]] std::size_t busy() const;
  /// Asks the threads idle now to leave, and waits until they have (or until a job is queued:
  /// a thread that takes it stays).
  void trim();

 private:
  void work();

  const Starter start_;
  mutable std::mutex mu_;
  std::condition_variable cv_;       // a job, trim, or closing
  std::condition_variable gone_cv_;  // a thread left
  struct Job {
    std::uint64_t id;
    std::function<void()> work;
    std::function<void()> then;
  };
  std::deque<Job> jobs_;
  std::uint64_t next_id_ = 0;
  std::size_t threads_ = 0;  // running, and being started
  std::size_t running_ = 0;  // in work(): each takes every queued job before it leaves
  std::size_t idle_ = 0;
  std::size_t trim_ = 0;  // idle threads asked to leave
  bool closing_ = false;  // destroyed: idle threads leave at once
};

}  // namespace kinformer::informer::detail
