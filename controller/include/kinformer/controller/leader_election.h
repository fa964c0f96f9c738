#pragma once
// LeaderElector: leader election on a coordination.k8s.io/v1 Lease with client-go's rules and
// defaults (k8s.io/client-go/tools/leaderelection).

#include <chrono>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>

#include "kinformer/client/log.h"
#include "kinformer/client/rest_client.h"
#include "kinformer/controller/resource_lock.h"
#include "kinformer/informer/clock.h"
#include "kinformer/informer/metrics_registry.h"

namespace kinformer::controller {

namespace detail {
class ElectorState;
}  // namespace detail

/// What a LeaderElector calls. Each may be null.
struct LeaderCallbacks {
  /// Runs on a thread of its own each time this elector becomes the leader. `stop` is requested
  /// when it stops leading (the renewals missed the renew deadline, another holder was seen, or
  /// stop()); the work must then return promptly: the elector waits for it to return before it
  /// calls on_stopped_leading, releases the Lease or campaigns again.
  std::function<void(std::stop_token stop)> on_started_leading;
  /// Called on the elector's thread after the work of on_started_leading has returned, each time
  /// this elector stops leading. Not called when it never led (client-go calls it then too).
  std::function<void()> on_stopped_leading;
  /// Called on the elector's thread whenever the holder it observes changes, with the new
  /// holder's identity (this elector's own too; "" once a holder released the Lease).
  std::function<void(const std::string& identity)> on_new_leader;
};

/// LeaderElector settings. The defaults are client-go's.
struct LeaderElectionOptions {
  /// The Lease: its namespace and name (required).
  std::string lease_namespace;
  std::string lease_name;
  /// This candidate's identity, unique among the candidates (e.g. the Pod's name; required).
  std::string identity;
  /// Reads and writes the Lease (required unless `lock` is set). Its request_timeout bounds how
  /// late a step-down can be: a request cannot be abandoned, so keep it below
  /// renew_deadline - retry_period (a client of its own with a short timeout).
  std::shared_ptr<client::RestClient> client;
  /// Instead of a LeaseLock over `client`: another lock (e.g. a test double).
  ResourceLockPtr lock;

  /// How long a holder's claim lasts, counted by the other candidates from when they saw the
  /// Lease change. Whole seconds (the Lease stores leaseDurationSeconds).
  std::chrono::milliseconds lease_duration = std::chrono::seconds(15);
  /// The leader steps down when it has not renewed for this long (counted from the start of its
  /// last successful renewal). Must be below lease_duration, so it stops before others may lead.
  std::chrono::milliseconds renew_deadline = std::chrono::seconds(10);
  /// The wait between tries: to acquire (with up to 1.2 x jitter; a candidate tries sooner when
  /// the lease it observed expires or is released) and to renew. renew_deadline must exceed
  /// 1.2 x retry_period (client-go's rule).
  std::chrono::milliseconds retry_period = std::chrono::seconds(2);
  /// A candidate learns of the lock's changes from its watch (ResourceLock::watch; a LeaseLock
  /// watches its Lease) as they happen, not only at its tries: the lease duration counts from
  /// then, it tries when that lease expires, and at once when the Lease is released or deleted.
  /// False, or a lock without a watch: only the tries' reads (client-go's way).
  bool watch_lease = true;
  /// On stop(), a leader writes the Lease over with no holder and leaseDurationSeconds 1
  /// (client-go's ReleaseOnCancel), after its work returned, so the next candidate takes over
  /// as soon as its watch tells it (else at its next try) instead of after a whole lease.
  bool release_on_stop = false;

  LeaderCallbacks callbacks;

  /// Monotonic time for every wait and for expiry. Null: system_clock().
  informer::ClockPtr clock;
  /// Wall-clock time written into acquireTime and renewTime (informational: no elector compares
  /// them with its clock). Null: std::chrono::system_clock.
  std::function<MicroTime()> wall_clock;
  /// Jitter of the acquire waits. Null: informer::default_random().
  informer::RandomSource random;
  /// Where log lines go (component "leader-election", field lease=namespace/name). Null: stderr.
  client::LogSink log;
  /// Null: no metrics. Otherwise client-go's leader_election_master_status (1 while leading)
  /// and leader_election_slowpath_total (renewals that had to read the Lease first), labelled
  /// name=<lease_name>; one elector per lease name and registry.
  std::shared_ptr<informer::MetricsRegistry> registry;
};

/// Competes for a Lease with client-go's rules:
///
/// - Acquire: every retry_period (jittered), read the Lease; create it when absent; take it over
///   when it has no holder or has expired. Every write is guarded by the Lease's resourceVersion:
///   a 409 Conflict means another candidate wrote first, and is not leadership.
/// - Expiry is judged on this process's monotonic clock only: a holder's claim lasts its
///   leaseDurationSeconds from when THIS elector last saw the record change (client-go's
///   observedTime), never from the holder's renewTime, so clock skew between replicas cannot
///   make two leaders. With watch_lease, a candidate sees each change when its watch delivers
///   it; the next try is then at the earlier of the jittered retry and the moment the lease it
///   observed expires, and at once for a Lease seen released or deleted.
/// - Lead: on_started_leading runs on a thread of its own; every retry_period the leader renews.
///   When renewals keep failing until renew_deadline has passed since the last success began, or
///   a read shows another holder, it steps down: the work's stop token is requested, the work
///   returns, on_stopped_leading runs. Then it campaigns again (client-go's Run returns
///   instead).
/// - stop() ends the campaign; a leader steps down as above and, with release_on_stop, releases
///   the Lease.
///
/// Threads: one of its own from start() to stop() (all reads and writes, on_new_leader and
/// on_stopped_leading run on it), plus the work's thread while leading, plus the lock's watch
/// (a LeaseLock's: one thread) with watch_lease.
/// Thread-safety: thread-safe; no concurrent call causes a data race. stop() (and the
/// destructor) must not be called from a callback: stop() throws std::logic_error there.
class LeaderElector {
 public:
  /// Throws client::ConfigError naming the field: an empty lease_namespace, lease_name or
  /// identity; neither client nor lock; durations not positive, lease_duration not whole
  /// seconds, renew_deadline not below lease_duration, or not above 1.2 x retry_period; a
  /// registry where an elector of the same lease name has metrics already.
  explicit LeaderElector(LeaderElectionOptions options);
  /// Calls stop(); from a callback (where stop() throws) it terminates the process.
  ~LeaderElector();
  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  /// Starts campaigning on the elector's thread. Once only: a second call (also after stop())
  /// throws std::logic_error.
  void start();
  /// Stops campaigning: a leader steps down (its work stopped, on_stopped_leading called) and,
  /// with release_on_stop, releases the Lease; the elector's thread is joined. Waits for a
  /// request in flight (at most the client's request_timeout). Idempotent. Throws
  /// std::logic_error when called from a callback (it would wait for itself).
  void stop();

  /// True while this elector leads: from just before on_started_leading is started until just
  /// before its stop token is requested.
  [[nodiscard]] bool is_leader() const;
  /// The holder's identity as last observed in the Lease ("" before the first read, or when no
  /// one holds it).
  [[nodiscard]] std::string leader() const;
  [[nodiscard]] const std::string& identity() const noexcept { return identity_; }

 private:
  const std::string identity_;
  std::unique_ptr<detail::ElectorState> state_;
};

using LeaderElectorPtr = std::unique_ptr<LeaderElector>;

}  // namespace kinformer::controller
