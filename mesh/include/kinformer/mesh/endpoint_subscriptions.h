#pragma once
// EndpointSubscriptions: delivers an EndpointIndex's snapshots to subscribers, each on its own
// serial strand of the HandlerExecutor, coalesced to the latest snapshot.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "kinformer/client/log.h"
#include "kinformer/informer/clock.h"
#include "kinformer/informer/handle.h"
#include "kinformer/informer/handler_executor.h"
#include "kinformer/informer/metrics_registry.h"
#include "kinformer/mesh/endpoint_index.h"

namespace kinformer::mesh {

namespace detail {
class Subscriber;
struct SubscriberMetricFamilies;
}  // namespace detail

/// What a subscriber's delivery looks like now. "Delivered" is what the subscriber's callback
/// returned from; "applied" is what it acknowledged with Subscription::ack() (e.g. a proxy's
/// ACK): sent is not applied.
struct SubscriberStats {
  std::uint64_t latest_version = 0;     ///< newest snapshot handed to this subscriber
  std::uint64_t delivered_version = 0;  ///< newest snapshot whose callback returned; 0: none yet
  std::uint64_t applied_version = 0;    ///< newest version passed to ack(); 0: none
  std::uint64_t deliveries = 0;         ///< callbacks that returned
  std::uint64_t coalesced = 0;          ///< snapshots replaced by a newer one before delivery
  /// How long the oldest snapshot not yet delivered (in the callback or waiting) has waited;
  /// zero when the subscriber is up to date.
  informer::Clock::Duration lag{0};
  /// When the running callback started; nullopt when none runs.
  std::optional<informer::Clock::TimePoint> stalled_since;
};

/// One subscriber's delivery options.
struct SubscriberOptions {
  /// Names the subscriber in metrics (label "subscriber") and logs. Keep it bounded (a component
  /// or proxy-group name, not a proxy ID); several subscribers may share it (their series differ
  /// by the label "id", unique in the process). Empty: "subscriber-<id>".
  std::string name;
  /// How long close() (and the destructor) waits for a running callback to return.
  std::chrono::milliseconds close_timeout{5000};
};

/// The RAII handle of one subscriber (a Handle): destroying or closing it stops the subscriber.
///
/// close() is idempotent; after it returns no callback starts, and it has waited up to
/// close_timeout for a running one (from inside the subscriber's own callback it does not wait).
/// It returns true when no callback of this subscriber runs any more (false: close_timeout
/// passed with the callback still running, or called from inside it).
/// Lifetime: may outlive the EndpointSubscriptions, the index and the executor (calls are then
/// no-ops or return at once).
/// Thread-safety: close(), ack() and stats() may be called concurrently from any thread,
/// including from inside the callback; moving must not race with other calls on the object.
class [[nodiscard]] Subscription : public informer::Handle {
 public:
  Subscription() = default;

  /// Records that the subscriber applied `version` (kept if newer than the last one acked).
  void ack(std::uint64_t version);
  [[nodiscard]] SubscriberStats stats() const;

 private:
  friend class EndpointSubscriptions;
  explicit Subscription(std::shared_ptr<detail::Subscriber> s);
  [[nodiscard]] std::shared_ptr<detail::Subscriber> subscriber() const;
};

/// Delivers snapshots of an EndpointIndex to many subscribers. Delivery is separate from
/// computation: the index's watch callback only stores the snapshot in the subscriber's single
/// pending slot (replacing an older one: a slow subscriber gets the newest state, never a
/// backlog) and wakes the subscriber's strand. Each subscriber's callback runs serially on its own
/// strand of `executor`, so a subscriber blocked in its callback delays neither the index (whose
/// input calls never wait for a subscriber) nor any other subscriber (the executor compensates for
/// a blocked worker).
///
/// Per subscriber, the delivered and applied versions, the lag and the stalled-since time are
/// observable (Subscription::stats(), and Prometheus gauges when a registry is given:
/// kinformer_endpoint_subscriber_delivered_version, _applied_version, _lag_seconds (at the last
/// delivery), _stalled_since_seconds (unix time the running callback started, 0 when none) and
/// the counter kinformer_endpoint_subscriber_coalesced_total, labels "subscriber" and "id"; each
/// series belongs to one subscriber and is removed when it closes).
///
/// Lifetime: holds the index and the executor by shared_ptr; Subscriptions may outlive it.
/// Thread-safety: thread-safe; subscribe() may be called concurrently from any thread, also from
/// inside a subscriber's callback.
class EndpointSubscriptions {
 public:
  using Callback = std::function<void(const EndpointSnapshotPtr&)>;

  /// `clock` null: system_clock(). `registry` null: no Prometheus metrics (stats() still works).
  /// `log` null: stderr. Throws std::invalid_argument for a null index or executor.
  EndpointSubscriptions(EndpointIndexPtr index, informer::HandlerExecutorPtr executor,
                        informer::ClockPtr clock = nullptr,
                        std::shared_ptr<informer::MetricsRegistry> registry = nullptr,
                        client::LogSink log = {});
  ~EndpointSubscriptions();
  EndpointSubscriptions(const EndpointSubscriptions&) = delete;
  EndpointSubscriptions& operator=(const EndpointSubscriptions&) = delete;

  /// Subscribes to one subset. The first delivery is the subset's snapshot at subscription (a
  /// service nobody has seen yet: a snapshot with no cluster); then every newer one, coalesced.
  /// `callback` must stay valid until the Subscription is closed; an exception it throws is
  /// caught and logged, and the next snapshot is delivered as usual.
  Subscription subscribe(const EndpointQuery& query, Callback callback,
                         SubscriberOptions options = {});

  [[nodiscard]] const EndpointIndexPtr& index() const noexcept { return index_; }

 private:
  EndpointIndexPtr index_;
  informer::HandlerExecutorPtr executor_;
  informer::ClockPtr clock_;
  std::shared_ptr<detail::SubscriberMetricFamilies> families_;  // null without a registry
  client::Logger log_;
};

}  // namespace kinformer::mesh
