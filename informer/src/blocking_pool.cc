#include "detail/blocking_pool.h"

#include <algorithm>
#include <thread>
#include <utility>

namespace kinformer::informer::detail {

BlockingPool& BlockingPool::instance() {
  // NOLINTNEXTLINE(cppcoreguidelines-owning-memory): never freed
  static auto* pool =
      new BlockingPool([](std::function<void()> body) { std::thread(std::move(body)).detach(); });
  return *pool;
}

BlockingPool::BlockingPool(Starter start) : start_(std::move(start)) {}

BlockingPool::~BlockingPool() {
  std::unique_lock lock(mu_);
  closing_ = true;
  cv_.notify_all();
  gone_cv_.wait(lock, [&] { return threads_ == 0; });
}

bool BlockingPool::submit(std::function<void()> job, std::function<void()> then) {
  std::unique_lock lock(mu_);
  const std::uint64_t id = next_id_++;
  jobs_.push_back({id, std::move(job), std::move(then)});
  if (idle_ > jobs_.size() - 1) {  // an idle thread that no queued job has claimed yet
    cv_.notify_one();
    return true;
  }
  ++threads_;
  lock.unlock();
  try {
    start_([this] { work(); });
    return true;
  } catch (...) {
    lock.lock();
    --threads_;
    gone_cv_.notify_all();
    // Another thread may have taken the job meanwhile: then its `then` answers the caller.
    // Otherwise it goes (by identity: others may have queued meanwhile), and the caller tries
    // again later rather than wait behind threads that may be blocked for long.
    auto mine = std::find_if(jobs_.begin(), jobs_.end(), [&](const Job& j) { return j.id == id; });
    if (mine == jobs_.end()) return true;
    jobs_.erase(mine);
    return false;
  }
}

void BlockingPool::work() {
  std::unique_lock lock(mu_);
  ++running_;
  ++idle_;
  for (;;) {
    cv_.wait_for(lock, kIdle, [&] { return !jobs_.empty() || trim_ > 0 || closing_; });
    if (jobs_.empty()) {  // idle for kIdle, asked to leave by trim(), or the pool goes
      if (trim_ > 0) --trim_;
      break;
    }
    --idle_;
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    job.work();
    job.work = nullptr;  // what it holds goes before `then` runs
    lock.lock();
    ++idle_;
    if (job.then) {
      lock.unlock();
      job.then();
      job.then = nullptr;
      lock.lock();
    }
  }
  --idle_;
  --running_;
  --threads_;
  gone_cv_.notify_all();
}

std::size_t BlockingPool::threads() const {
  std::lock_guard lock(mu_);
  return threads_;
}

std::size_t BlockingPool::busy() const {
  std::lock_guard lock(mu_);
  return running_ - idle_;
}

void BlockingPool::trim() {
  std::unique_lock lock(mu_);
  const std::size_t leaving = idle_;
  const std::size_t target = threads_ - leaving;
  trim_ += leaving;
  cv_.notify_all();
  gone_cv_.wait(lock, [&] { return threads_ <= target || !jobs_.empty(); });
  trim_ = 0;  // a thread that took a job instead stays, and later ones wait kIdle again
}

}  // namespace kinformer::informer::detail
