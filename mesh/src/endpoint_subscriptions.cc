#include "kinformer/mesh/endpoint_subscriptions.h"

#include <atomic>
#include <deque>
#include <mutex>
#include <stdexcept>

#include "kinformer/informer/metrics_registry.h"

namespace kinformer::mesh {
namespace detail {

struct SubscriberMetricFamilies {
  explicit SubscriberMetricFamilies(std::shared_ptr<informer::MetricsRegistry> r)
      : registry(std::move(r)),
        delivered_version(
            registry->gauge("kinformer_endpoint_subscriber_delivered_version",
                            "Version of the newest endpoint snapshot whose callback returned")),
        applied_version(
            registry->gauge("kinformer_endpoint_subscriber_applied_version",
                            "Version of the newest endpoint snapshot the subscriber acknowledged")),
        lag(registry->gauge(
            "kinformer_endpoint_subscriber_lag_seconds",
            "At the last delivery: how long the oldest undelivered snapshot had waited")),
        stalled_since(registry->gauge("kinformer_endpoint_subscriber_stalled_since_seconds",
                                      "Unix time the running callback started; 0 when none runs")),
        coalesced(registry->counter("kinformer_endpoint_subscriber_coalesced_total",
                                    "Snapshots replaced by a newer one before delivery")) {}
  std::shared_ptr<informer::MetricsRegistry> registry;
  informer::GaugeFamily& delivered_version;
  informer::GaugeFamily& applied_version;
  informer::GaugeFamily& lag;
  informer::GaugeFamily& stalled_since;
  informer::CounterFamily& coalesced;
};

namespace {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

/// One subscriber: a pending slot holding at most the latest snapshot, and a strand.
/// Thread-safety: offer() from any thread (the index's input threads), drain() on the strand,
/// the rest from any thread.
class Subscriber final : public informer::Closable,
                         public std::enable_shared_from_this<Subscriber> {
 public:
  struct Metrics {
    informer::Gauge* delivered_version = nullptr;
    informer::Gauge* applied_version = nullptr;
    informer::Gauge* lag = nullptr;
    informer::Gauge* stalled_since = nullptr;
    informer::Counter* coalesced = nullptr;
  };

  // `id` is unique in the process: it keeps the metric series of two subscribers that share a
  // name apart (one series has one owner, who removes it on close).
  Subscriber(std::string name, std::uint64_t id, EndpointSubscriptions::Callback callback,
             informer::ClockPtr clock, std::shared_ptr<SubscriberMetricFamilies> families,
             std::chrono::milliseconds close_timeout, const client::Logger& log)
      : name_(std::move(name)),
        callback_(std::move(callback)),
        clock_(std::move(clock)),
        families_(std::move(families)),
        close_timeout_(close_timeout),
        log_(log.with("endpoint-subscriptions",
                      {{"subscriber", name_}, {"subscriber_id", std::to_string(id)}})) {
    if (families_) {
      const std::map<std::string, std::string> labels{{"subscriber", name_},
                                                      {"id", std::to_string(id)}};
      metrics_.delivered_version = &families_->delivered_version.add(labels);
      metrics_.applied_version = &families_->applied_version.add(labels);
      metrics_.lag = &families_->lag.add(labels);
      metrics_.stalled_since = &families_->stalled_since.add(labels);
      metrics_.coalesced = &families_->coalesced.add(labels);
    }
  }

  ~Subscriber() override {
    if (!families_) return;
    families_->delivered_version.remove(metrics_.delivered_version);
    families_->applied_version.remove(metrics_.applied_version);
    families_->lag.remove(metrics_.lag);
    families_->stalled_since.remove(metrics_.stalled_since);
    families_->coalesced.remove(metrics_.coalesced);
  }

  void start(informer::HandlerExecutor& executor, EndpointIndex& index,
             const EndpointQuery& query) {
    std::weak_ptr<Subscriber> weak = weak_from_this();
    strand_ = executor.make_strand(
        [weak] {
          auto self = weak.lock();
          return self && self->drain();
        },
        name_);
    EndpointSnapshotPtr current;
    {
      std::lock_guard lock(watch_mu_);
      watch_ = index.watch(
          query,
          [weak](const EndpointSnapshotPtr& s) {
            if (auto self = weak.lock()) self->offer(s);
          },
          &current);
    }
    offer(current);
  }

  // The index's callback: keep only the newest snapshot, wake the strand. Never waits for the
  // subscriber's callback.
  void offer(const EndpointSnapshotPtr& s) {
    {
      std::lock_guard lock(mu_);
      if (closed_ || s->version <= latest_version_) return;  // an older snapshot, arrived late
      latest_version_ = s->version;
      if (!pending_.empty()) {
        ++coalesced_;
        if (metrics_.coalesced) metrics_.coalesced->increment();
      } else {
        pending_since_ = clock_->now();
      }
      pending_.clear();  // coalesce: the pending slot holds the latest snapshot only
      pending_.push_back(s);
    }
    strand_->wake();
  }

  // One turn of the strand: deliver the pending snapshot, if any. True if another is pending.
  bool drain() {
    EndpointSnapshotPtr s;
    {
      std::lock_guard lock(mu_);
      if (closed_ || pending_.empty()) return false;
      s = std::move(pending_.front());
      pending_.pop_front();
      in_flight_since_ = pending_since_;
      running_since_ = clock_->now();
    }
    if (metrics_.stalled_since) metrics_.stalled_since->set(unix_now());
    try {
      callback_(s);
    } catch (const std::exception& e) {
      log_.error("endpoint subscriber callback threw", {{"error", e.what()}});
    } catch (...) {
      log_.error("endpoint subscriber callback threw", {{"error", "non-standard exception"}});
    }
    std::lock_guard lock(mu_);
    informer::Clock::TimePoint now = clock_->now();
    if (metrics_.lag && in_flight_since_) {
      metrics_.lag->set(std::chrono::duration<double>(now - *in_flight_since_).count());
    }
    in_flight_since_.reset();
    running_since_.reset();
    delivered_version_ = s->version;
    ++deliveries_;
    if (metrics_.stalled_since) metrics_.stalled_since->set(0);
    if (metrics_.delivered_version) {
      metrics_.delivered_version->set(static_cast<double>(s->version));
    }
    return !pending_.empty() && !closed_;
  }

  bool close() override {
    {
      std::lock_guard lock(mu_);
      closed_ = true;
      pending_.clear();
    }
    {
      std::lock_guard lock(watch_mu_);
      watch_.close();
    }
    if (!strand_) return true;
    strand_->close();
    if (strand_->running_here()) return false;
    bool idle = strand_->wait_idle(close_timeout_);
    if (!idle) {
      log_.warn("endpoint subscriber callback still running after close timeout",
                {{"close_timeout_ms", std::to_string(close_timeout_.count())}});
    }
    return idle;
  }

  [[nodiscard]] bool active() const override {
    std::lock_guard lock(mu_);
    return !closed_;
  }

  void ack(std::uint64_t version) {
    std::lock_guard lock(mu_);
    if (version <= applied_version_) return;
    applied_version_ = version;
    if (metrics_.applied_version) metrics_.applied_version->set(static_cast<double>(version));
  }

  SubscriberStats stats() const {
    std::lock_guard lock(mu_);
    SubscriberStats out;
    out.latest_version = latest_version_;
    out.delivered_version = delivered_version_;
    out.applied_version = applied_version_;
    out.deliveries = deliveries_;
    out.coalesced = coalesced_;
    // The oldest undelivered snapshot is the one in the callback, else the pending one.
    std::optional<informer::Clock::TimePoint> oldest = in_flight_since_;
    if (!oldest && !pending_.empty()) oldest = pending_since_;
    if (oldest) out.lag = clock_->now() - *oldest;
    out.stalled_since = running_since_;
    return out;
  }

 private:
  const std::string name_;
  const EndpointSubscriptions::Callback callback_;
  const informer::ClockPtr clock_;
  const std::shared_ptr<SubscriberMetricFamilies> families_;
  const std::chrono::milliseconds close_timeout_;
  const client::Logger log_;
  Metrics metrics_;
  informer::StrandPtr strand_;  // set by start(), then read only
  std::mutex watch_mu_;
  EndpointIndex::Watch watch_;  // guarded by watch_mu_

  mutable std::mutex mu_;
  std::deque<EndpointSnapshotPtr> pending_;     // guarded by mu_: at most one, the latest
  informer::Clock::TimePoint pending_since_{};  // guarded by mu_: when pending_ filled
  std::optional<informer::Clock::TimePoint>
      in_flight_since_;  // guarded by mu_: pending_since_ of the running one
  std::optional<informer::Clock::TimePoint> running_since_;  // guarded by mu_
  std::uint64_t latest_version_ = 0;                         // guarded by mu_
  std::uint64_t delivered_version_ = 0;                      // guarded by mu_
  std::uint64_t applied_version_ = 0;                        // guarded by mu_
  std::uint64_t deliveries_ = 0;                             // guarded by mu_
  std::uint64_t coalesced_ = 0;                              // guarded by mu_
  bool closed_ = false;                                      // guarded by mu_
};

}  // namespace detail

// ---- Subscription ----

Subscription::Subscription(std::shared_ptr<detail::Subscriber> s) : Handle(std::move(s)) {}

std::shared_ptr<detail::Subscriber> Subscription::subscriber() const {
  return std::static_pointer_cast<detail::Subscriber>(target());
}

void Subscription::ack(std::uint64_t version) {
  if (auto s = subscriber()) s->ack(version);
}

SubscriberStats Subscription::stats() const {
  auto s = subscriber();
  return s ? s->stats() : SubscriberStats{};
}

// ---- EndpointSubscriptions ----

EndpointSubscriptions::EndpointSubscriptions(EndpointIndexPtr index,
                                             informer::HandlerExecutorPtr executor,
                                             informer::ClockPtr clock,
                                             std::shared_ptr<informer::MetricsRegistry> registry,
                                             client::LogSink log)
    : index_(std::move(index)),
      executor_(std::move(executor)),
      clock_(clock ? std::move(clock) : informer::system_clock()),
      log_(std::move(log), "endpoint-subscriptions") {
  if (!index_) throw std::invalid_argument("EndpointSubscriptions: the index is null");
  if (!executor_) throw std::invalid_argument("EndpointSubscriptions: the executor is null");
  if (registry) families_ = std::make_shared<detail::SubscriberMetricFamilies>(std::move(registry));
}

EndpointSubscriptions::~EndpointSubscriptions() = default;

Subscription EndpointSubscriptions::subscribe(const EndpointQuery& query, Callback callback,
                                              SubscriberOptions options) {
  // Process-wide, like handler IDs: two EndpointSubscriptions on one registry never hand out
  // the same ID (nor the same default name).
  static std::atomic<std::uint64_t> next_id{0};
  const std::uint64_t id = ++next_id;
  std::string name =
      options.name.empty() ? "subscriber-" + std::to_string(id) : std::move(options.name);
  auto s = std::make_shared<detail::Subscriber>(std::move(name), id, std::move(callback), clock_,
                                                families_, options.close_timeout, log_);
  s->start(*executor_, *index_, query);
  return Subscription(std::move(s));
}

}  // namespace kinformer::mesh
