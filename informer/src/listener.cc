#include "listener.h"

#include <cstdio>

namespace kinformer::informer::detail {
namespace {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

Listener::Listener(ResourceEventHandlerPtr handler, std::string name, std::uint64_t id,
                   std::shared_ptr<InformerMetrics> metrics)
    : handler_(std::move(handler)),
      name_(std::move(name)),
      id_(id),
      informer_metrics_(std::move(metrics)),
      metrics_(std::make_unique<HandlerMetrics>(*informer_metrics_, name_, id_)) {}

Listener::~Listener() {
  std::lock_guard join_lock(join_mu_);
  if (thread_.joinable()) {
    if (std::this_thread::get_id() == thread_.get_id()) {
      thread_.detach();  // last reference dropped by our own executor: it is about to exit
    } else {
      request_stop();
      thread_.join();
    }
  }
}

void Listener::start() {
  // The thread holds a strong reference so a detached executor never outlives its state.
  auto self = shared_from_this();
  thread_ = std::jthread([self](std::stop_token stop) { self->run(stop); });
}

void Listener::enqueue(Notification n) {
  std::lock_guard lock(mu_);
  if (stopped_) return;
  std::string key = n.object->key();
  auto [it, inserted] = pending_.try_emplace(key);
  Pending& p = it->second;
  if (inserted) {
    p.seq = next_seq_++;
    order_.emplace(p.seq, key);
  }
  std::size_t before = p.items.size();
  coalesce(p.items, std::move(n));
  depth_ = depth_ - before + p.items.size();
  if (p.items.empty()) {
    order_.erase(p.seq);
    pending_.erase(it);
    check_synced();
  }
  update_depth();
  cv_.notify_one();
}

void Listener::mark_sync_barrier() {
  std::lock_guard lock(mu_);
  if (synced_ || barrier_) return;
  barrier_ = next_seq_ - 1;
  check_synced();
}

void Listener::check_synced() {
  if (synced_ || !barrier_) return;
  bool before_pending = !order_.empty() && order_.begin()->first <= *barrier_;
  bool before_in_flight = in_flight_seq_ != 0 && in_flight_seq_ <= *barrier_;
  if (!before_pending && !before_in_flight) synced_ = true;
}

void Listener::update_depth() { metrics_->queue_depth.Set(static_cast<double>(depth_)); }

void Listener::request_stop() {
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
    order_.clear();
    pending_.clear();
    depth_ = 0;
    update_depth();
  }
  cv_.notify_all();
  thread_.request_stop();
}

bool Listener::on_executor_thread() const {
  std::lock_guard lock(mu_);
  return std::this_thread::get_id() == thread_id_;
}

bool Listener::exited() const {
  std::lock_guard lock(mu_);
  return exited_;
}

void Listener::join(std::chrono::milliseconds timeout) {
  std::lock_guard join_lock(join_mu_);  // close() and shutdown may join concurrently
  if (!thread_.joinable()) return;
  std::unique_lock lock(mu_);
  bool done = cv_.wait_for(lock, timeout, [this] { return exited_; });
  lock.unlock();
  if (done) {
    thread_.join();
  } else {
    std::fprintf(stderr,
                 "level=error component=informer msg=\"handler did not return within the stop "
                 "timeout; detaching its thread\" handler=%s id=%llu\n",
                 name_.c_str(), static_cast<unsigned long long>(id_));
    thread_.detach();
  }
}

bool Listener::has_synced() const {
  std::lock_guard lock(mu_);
  return synced_;
}

bool Listener::closed() const {
  std::lock_guard lock(mu_);
  return stopped_;
}

std::size_t Listener::queue_depth() const {
  std::lock_guard lock(mu_);
  return depth_;
}

void Listener::deliver(const Notification& n) {
  metrics_->delivery_lag.Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - n.enqueued).count());
  metrics_->stalled_since.Set(unix_now());
  try {
    switch (n.kind) {
      case Notification::Kind::add: handler_->on_add(n.object, n.flag); break;
      case Notification::Kind::update: handler_->on_update(n.old_object, n.object); break;
      case Notification::Kind::del: handler_->on_delete(n.object, n.flag); break;
    }
  } catch (const std::exception& e) {
    exceptions_.fetch_add(1);
    metrics_->exceptions.Increment();
    std::fprintf(stderr, "level=error component=informer msg=\"handler threw\" handler=%s error=\"%s\"\n",
                 name_.c_str(), e.what());
  } catch (...) {
    exceptions_.fetch_add(1);
    metrics_->exceptions.Increment();
    std::fprintf(stderr, "level=error component=informer msg=\"handler threw\" handler=%s\n",
                 name_.c_str());
  }
  metrics_->stalled_since.Set(0);
}

void Listener::run(std::stop_token stop) {
  {
    std::lock_guard lock(mu_);
    thread_id_ = std::this_thread::get_id();
  }
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, stop, [this] { return stopped_ || !order_.empty(); });
    if (stopped_ || stop.stop_requested()) break;
    auto first = order_.begin();
    std::uint64_t seq = first->first;
    auto it = pending_.find(first->second);
    std::vector<Notification> items = std::move(it->second.items);
    pending_.erase(it);
    order_.erase(first);
    in_flight_seq_ = seq;
    lock.unlock();
    for (const auto& n : items) {
      {
        std::lock_guard l(mu_);
        if (stopped_) break;
        --depth_;
        update_depth();
      }
      deliver(n);
    }
    lock.lock();
    in_flight_seq_ = 0;
    check_synced();
  }
  exited_ = true;
  lock.unlock();
  cv_.notify_all();
}

}  // namespace kinformer::informer::detail
