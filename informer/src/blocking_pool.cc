#include "detail/blocking_pool.h"

#include <thread>
#include <utility>

namespace kinformer::informer::detail {

BlockingPool& BlockingPool::instance() {
  static auto* pool = new BlockingPool();  // NOLINT(cppcoreguidelines-owning-memory): never freed
  return *pool;
}

void BlockingPool::submit(std::function<void()> job, std::function<void()> then) {
  std::unique_lock lock(mu_);
  jobs_.push_back({std::move(job), std::move(then)});
  if (idle_ > jobs_.size() - 1) {  // an idle thread that no queued job has claimed yet
    cv_.notify_one();
    return;
  }
  ++threads_;
  lock.unlock();
  try {
    std::thread([this] { work(); }).detach();
  } catch (...) {
    lock.lock();
    --threads_;
    if (threads_ > 0) return;  // queued: a thread that frees up takes it
    jobs_.pop_back();          // no thread to run it: the caller is told
    throw;
  }
}

void BlockingPool::work() {
  std::unique_lock lock(mu_);
  ++idle_;
  for (;;) {
    cv_.wait_for(lock, kIdle, [&] { return !jobs_.empty() || trim_ > 0; });
    if (jobs_.empty()) {  // idle for kIdle, or asked to leave by trim()
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
  --threads_;
  gone_cv_.notify_all();
}

std::size_t BlockingPool::threads() const {
  std::lock_guard lock(mu_);
  return threads_;
}

std::size_t BlockingPool::busy() const {
  std::lock_guard lock(mu_);
  return threads_ - idle_;
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
