#include "listener.h"

#include <cstdio>
#include <thread>

namespace kinformer::informer::detail {
namespace {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The listener whose callback runs on this thread (null outside callbacks).
thread_local Listener* tl_current = nullptr;

}  // namespace

Listener::Listener(ResourceEventHandlerPtr handler, std::string name, std::uint64_t id,
                   std::shared_ptr<InformerMetrics> metrics, HandlerExecutorPtr executor)
    : handler_(std::move(handler)),
      name_(std::move(name)),
      id_(id),
      executor_(std::move(executor)),
      informer_metrics_(std::move(metrics)),
      metrics_(std::make_unique<HandlerMetrics>(*informer_metrics_, name_, id_)) {
  batch_.reserve(kBatch);
}

Listener::~Listener() { request_stop(); }

void Listener::start() {
  // The strand's drain holds a strong reference; the strand drops it once closed and idle.
  auto self = shared_from_this();
  StrandPtr strand = executor_->make_strand([self] { return self->drain(); }, name_);
  bool wake = false;
  {
    std::lock_guard lock(mu_);
    if (stopped_) {
      strand->close();
      return;
    }
    strand_ = strand;
    wake = head_ != nullptr;
  }
  if (wake) strand->wake();
}

void Listener::link_tail(Slot* s) {
  s->prev = tail_;
  s->next = nullptr;
  if (tail_ != nullptr) {
    tail_->next = s;
  } else {
    head_ = s;
  }
  tail_ = s;
}

void Listener::unlink(Slot* s) {
  (s->prev != nullptr ? s->prev->next : head_) = s->next;
  (s->next != nullptr ? s->next->prev : tail_) = s->prev;
  s->prev = s->next = nullptr;
}

void Listener::enqueue(std::span<const Delta> batch, std::chrono::steady_clock::time_point enqueued) {
  StrandPtr strand;
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    for (const Delta& d : batch) {
      auto [it, inserted] = pending_.try_emplace(d.key);
      Slot& s = it->second;
      if (inserted) {
        s.seq = next_seq_++;
        s.key = &it->first;
        link_tail(&s);
      }
      std::size_t before = s.items.size();
      coalesce(s.items, Notification{d.kind, d.old_object, d.object, d.flag, enqueued});
      depth_ = depth_ - before + s.items.size();
      if (s.items.empty()) {  // cancelled out (add + delete)
        unlink(&s);
        pending_.erase(it);
      }
    }
    check_synced();
    metrics_->queue_depth.Set(static_cast<double>(depth_ + in_batch_.load()));
    if (head_ != nullptr) strand = strand_;
  }
  if (strand) strand->wake();  // once per batch; a no-op while already scheduled
}

void Listener::mark_sync_barrier() {
  std::lock_guard lock(mu_);
  if (synced_ || barrier_) return;
  barrier_ = next_seq_ - 1;
  check_synced();
}

void Listener::check_synced() {
  if (synced_ || !barrier_) return;
  bool before_pending = head_ != nullptr && head_->seq <= *barrier_;
  bool before_in_flight = in_flight_first_seq_ != 0 && in_flight_first_seq_ <= *barrier_;
  if (!before_pending && !before_in_flight) synced_ = true;
}

void Listener::clear_pending() {
  head_ = tail_ = nullptr;
  pending_.clear();
  depth_ = 0;
}

void Listener::request_stop() {
  StrandPtr strand;
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
    clear_pending();
    metrics_->queue_depth.Set(0);
    strand = strand_;
  }
  if (strand) strand->close();
}

bool Listener::on_executor_thread() const { return tl_current == this; }

bool Listener::join(std::chrono::milliseconds timeout) {
  StrandPtr strand;
  {
    std::lock_guard lock(mu_);
    strand = strand_;
  }
  if (!strand || on_executor_thread()) return true;
  Listener* caller = tl_current;  // a handler closing another handler from its callback
  bool idle = false;
  if (caller == nullptr) {
    idle = strand->wait_idle(timeout);
  } else {
    // While we wait, our own handler counts as "blocked in close()": a handler closing us from
    // its callback stops waiting for us, and we stop waiting for it if it is blocked likewise.
    caller->closing_others_.fetch_add(1);
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      idle = strand->wait_idle(std::chrono::milliseconds(5));
      if (idle || closing_others_.load() > 0 || std::chrono::steady_clock::now() >= deadline) break;
    }
    caller->closing_others_.fetch_sub(1);
    if (!idle && closing_others_.load() > 0) return true;  // it is blocked in close() itself
  }
  if (!idle) {
    std::fprintf(stderr,
                 "level=error component=informer msg=\"handler did not return within the stop "
                 "timeout; giving up on waiting for it\" handler=%s id=%llu\n",
                 name_.c_str(), static_cast<unsigned long long>(id_));
  }
  return idle;
}

bool Listener::has_synced() const {
  std::lock_guard lock(mu_);
  return synced_;
}

bool Listener::closed() const { return stopped_.load(); }

std::size_t Listener::queue_depth() const {
  std::lock_guard lock(mu_);
  return depth_ + in_batch_.load();
}

void Listener::deliver(const Notification& n) {
  metrics_->delivery_lag.Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - n.enqueued).count());
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
}

bool Listener::drain() {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return false;
    in_flight_first_seq_ = head_ != nullptr ? head_->seq : 0;
    while (head_ != nullptr && batch_.size() < kBatch) {
      Slot* s = head_;
      unlink(s);
      depth_ -= s->items.size();
      for (auto& n : s->items) batch_.push_back(std::move(n));
      pending_.erase(pending_.find(*s->key));
    }
    in_batch_.store(batch_.size());
  }
  // One stalled-since stamp per batch: it marks when the running batch started.
  metrics_->stalled_since.Set(unix_now());
  Listener* outer = tl_current;
  tl_current = this;
  for (const auto& n : batch_) {
    if (stopped_.load(std::memory_order_acquire)) break;
    in_batch_.fetch_sub(1);  // being delivered: no longer waiting
    deliver(n);
  }
  tl_current = outer;
  metrics_->stalled_since.Set(0);
  batch_.clear();
  std::lock_guard lock(mu_);
  in_batch_.store(0);
  in_flight_first_seq_ = 0;
  check_synced();
  metrics_->queue_depth.Set(static_cast<double>(depth_));
  return head_ != nullptr && !stopped_;
}

}  // namespace kinformer::informer::detail
