#include "listener.h"

#include <algorithm>
#include <thread>

#include "detail/unix_time.h"

namespace kinformer::informer::detail {
namespace {

// The listener whose callback runs on this thread (null outside callbacks).
thread_local Listener* tl_current = nullptr;

// Who waits for whom: a callback of a listener that is inside close() of another listener. One
// graph for the process, so that a cycle of such waits is seen from any of its members.
std::mutex g_wait_mu;

}  // namespace

// g_wait_mu held. A listener in the graph is alive: its callback runs (the strand holds it) and
// the one it waits for is held by the close() that waits.
bool Listener::waits_for(const Listener* target) const {
  // Each listener waits for one at most, so the walk is a path; a cycle that does not pass
  // `target` is cut by the bound (its members see it themselves and stop waiting).
  std::size_t steps = 0;
  for (const Listener* l = this; l != nullptr && steps < 4096; l = l->waiting_for_, ++steps) {
    if (l == target) return true;
  }
  return false;
}

std::size_t key_hash(const client::ObjectMeta& meta) noexcept {
  std::size_t h = std::hash<std::string_view>{}(meta.name);
  // boost::hash_combine's mixing step.
  return h ^ (std::hash<std::string_view>{}(meta.namespace_) + 0x9e3779b97f4a7c15ULL + (h << 6) +
              (h >> 2));
}

bool Listener::SlotEq::operator()(const Probe& p, std::uint32_t i) const noexcept {
  const client::ObjectMeta& m = (*slots)[i].items.front().object->metadata;
  return m.name == p.meta->name && m.namespace_ == p.meta->namespace_;
}

Listener::Listener(ResourceEventHandlerPtr handler, std::string name, std::uint64_t id,
                   std::shared_ptr<InformerMetrics> metrics, HandlerExecutorPtr executor,
                   const client::Logger& log, ClockPtr clock)
    : handler_(std::move(handler)),
      name_(std::move(name)),
      id_(id),
      log_(log.with("informer", {{"handler", name_}, {"handler_id", std::to_string(id_)}})),
      executor_(std::move(executor)),
      clock_(std::move(clock)),
      informer_metrics_(std::move(metrics)),
      metrics_(std::make_unique<HandlerMetrics>(*informer_metrics_, name_, id_)),
      index_(0, SlotHash{&slots_}, SlotEq{&slots_}) {}

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
    wake = head_ != kNone;
  }
  if (wake) strand->wake();
}

std::uint32_t Listener::new_slot() {
  if (!free_.empty()) {
    std::uint32_t i = free_.back();
    free_.pop_back();
    return i;
  }
  slots_.emplace_back();
  return static_cast<std::uint32_t>(slots_.size() - 1);
}

void Listener::link_tail(std::uint32_t i) {
  Slot& s = slots_[i];
  s.prev = tail_;
  s.next = kNone;
  (tail_ != kNone ? slots_[tail_].next : head_) = i;
  tail_ = i;
}

void Listener::unlink(std::uint32_t i) {
  Slot& s = slots_[i];
  (s.prev != kNone ? slots_[s.prev].next : head_) = s.next;
  (s.next != kNone ? slots_[s.next].prev : tail_) = s.prev;
  s.prev = s.next = kNone;
}

void Listener::shrink_if_idle() {
  if (head_ != kNone || slots_.size() <= kKeepSlots) return;
  clear_pending();
}

HandlerExecutor::Strand* Listener::enqueue(std::span<const Delta> batch,
                                           Clock::TimePoint enqueued) {
  std::lock_guard lock(mu_);
  if (stopped_) return nullptr;
  for (const Delta& d : batch) {
    Probe probe{&d.object->metadata, d.hash};
    auto it = index_.find(probe);
    std::uint32_t i = 0;
    if (it != index_.end()) {
      i = *it;
    } else {
      i = new_slot();
      Slot& s = slots_[i];
      s.seq = next_seq_++;
      s.hash = d.hash;
      s.items.push_back(Notification{d.kind, d.old_object, d.object, d.flag, enqueued});
      index_.insert(i);
      link_tail(i);
      ++depth_;
      continue;
    }
    Slot& s = slots_[i];
    std::size_t before = s.items.size();
    coalesce(s.items, Notification{d.kind, d.old_object, d.object, d.flag, enqueued});
    depth_ = depth_ - before + s.items.size();
    if (s.items.empty()) {  // cancelled out (add + delete)
      unlink(i);
      index_.erase(it);
      free_.push_back(i);
    }
  }
  check_synced();
  // The worker sets the gauge when a turn starts and ends; here only during a turn (a slow or
  // stuck handler) or with a backlog, so an idle handler's hand-off does not write the gauge
  // that its worker writes too.
  std::size_t waiting = depth_ + in_batch_.load();
  if (in_turn_ || waiting > kBatch) metrics_->queue_depth.set(static_cast<double>(waiting));
  return head_ != kNone ? strand_.get() : nullptr;
}

void Listener::mark_sync_barrier() {
  std::lock_guard lock(mu_);
  if (synced_ || barrier_) return;
  barrier_ = next_seq_ - 1;
  check_synced();
}

void Listener::check_synced() {
  if (synced_ || !barrier_) return;
  bool before_pending = head_ != kNone && slots_[head_].seq <= *barrier_;
  bool before_in_flight = in_flight_first_seq_ != 0 && in_flight_first_seq_ <= *barrier_;
  if (!before_pending && !before_in_flight) {
    synced_ = true;
    synced_cv_.notify_all();
  }
}

void Listener::clear_pending() {
  head_ = tail_ = kNone;
  index_ = decltype(index_)(0, SlotHash{&slots_}, SlotEq{&slots_});
  std::vector<Slot>().swap(slots_);  // gives the capacity back (`= {}` would keep it)
  std::vector<std::uint32_t>().swap(free_);
  depth_ = 0;
}

void Listener::request_stop() {
  StrandPtr strand;
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
    synced_cv_.notify_all();
    clear_pending();
    metrics_->queue_depth.set(0);
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
    // The caller's callback now waits for this handler. If this handler's running callback
    // waits, directly or through others, for the caller, the waits form a cycle that would
    // never end: stop waiting (every member of the cycle sees it). A chain that ends in a
    // callback that is merely slow is waited for, as from any thread.
    {
      std::lock_guard lock(g_wait_mu);
      caller->waiting_for_ = this;
    }
    bool cycle = false;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      idle = strand->wait_idle(std::chrono::milliseconds(5));
      if (idle) break;
      {
        std::lock_guard lock(g_wait_mu);
        cycle = waits_for(caller);
      }
      if (cycle || std::chrono::steady_clock::now() >= deadline) break;
    }
    {
      std::lock_guard lock(g_wait_mu);
      caller->waiting_for_ = nullptr;
    }
    if (cycle) return true;
  }
  if (!idle) {
    log_.error("handler did not return within the stop timeout; giving up on waiting for it");
  }
  return idle;
}

bool Listener::has_synced() const {
  std::lock_guard lock(mu_);
  return synced_;
}

bool Listener::wait_for_sync(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  synced_cv_.wait_for(lock, timeout, [this] { return synced_ || stopped_.load(); });
  return synced_;
}

bool Listener::closed() const { return stopped_.load(); }

std::size_t Listener::queue_depth() const {
  std::lock_guard lock(mu_);
  return depth_ + in_batch_.load();
}

void Listener::deliver(const Notification& n) {
  try {
    switch (n.kind) {
      case Notification::Kind::add:
        handler_->on_add(n.object, n.flag);
        break;
      case Notification::Kind::update:
        handler_->on_update(n.old_object, n.object);
        break;
      case Notification::Kind::del:
        handler_->on_delete(n.object, n.flag);
        break;
    }
  } catch (const std::exception& e) {
    exceptions_.fetch_add(1);
    metrics_->exceptions.increment();
    log_.error("handler threw", {{"error", e.what()}});
  } catch (...) {
    exceptions_.fetch_add(1);
    metrics_->exceptions.increment();
    log_.error("handler threw");
  }
}

bool Listener::drain() {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return false;
    in_flight_first_seq_ = head_ != kNone ? slots_[head_].seq : 0;
    // A slot holds at most two notifications (a delete, then an add): a turn takes kBatch + 1.
    batch_.reserve(std::min(depth_, kBatch + 1));
    while (head_ != kNone && batch_.size() < kBatch) {
      std::uint32_t i = head_;
      unlink(i);
      Slot& s = slots_[i];
      depth_ -= s.items.size();
      index_.erase(i);  // before the items go: the index reads the key from them
      for (auto& n : s.items) batch_.push_back(std::move(n));
      s.items.clear();
      free_.push_back(i);
    }
    in_batch_.store(batch_.size());
    in_turn_ = true;
    metrics_->queue_depth.set(static_cast<double>(depth_ + batch_.size()));
  }
  // stalled-since marks when the running batch started.
  metrics_->stalled_since.set(unix_now());
  Listener* outer = tl_current;
  tl_current = this;
  for (const auto& n : batch_) {
    if (stopped_.load(std::memory_order_acquire)) break;
    in_batch_.fetch_sub(1);  // being delivered: no longer waiting
    // Read per callback: with a slow handler, the last of a batch waits for all before it.
    metrics_->delivery_lag.observe(
        std::chrono::duration<double>(clock_->now() - n.enqueued).count());
    deliver(n);
  }
  tl_current = outer;
  metrics_->stalled_since.set(0);
  batch_.clear();
  std::lock_guard lock(mu_);
  // Once the queue is empty its memory goes too: an informer's handlers are mostly idle. With a
  // backlog the next turn reuses it.
  if (head_ == kNone) batch_.shrink_to_fit();
  in_batch_.store(0);
  in_turn_ = false;
  in_flight_first_seq_ = 0;
  check_synced();
  shrink_if_idle();
  metrics_->queue_depth.set(static_cast<double>(depth_));
  return head_ != kNone && !stopped_;
}

}  // namespace kinformer::informer::detail
