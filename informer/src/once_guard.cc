#include "kinformer/informer/once_guard.h"

namespace kinformer::informer {

client::Status OnceGuard::run(const std::function<client::Status()>& step) {
  std::unique_lock lock(mu_);
  ++waiters_;
  cv_.wait(lock, [this] { return done_ || !running_; });
  --waiters_;
  if (done_) return client::Ok{};
  running_ = true;
  lock.unlock();
  std::optional<client::Status> result;
  try {
    result.emplace(step());
  } catch (...) {
    lock.lock();
    running_ = false;
    cv_.notify_all();
    throw;
  }
  lock.lock();
  running_ = false;
  if (result->ok()) done_ = true;  // recorded only after the step succeeded, under the lock
  cv_.notify_all();
  return std::move(*result);
}

std::size_t OnceGuard::waiters() const {
  std::lock_guard lock(mu_);
  return waiters_;
}

bool OnceGuard::done() const {
  std::lock_guard lock(mu_);
  return done_;
}

}  // namespace kinformer::informer
