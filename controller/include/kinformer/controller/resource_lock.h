#pragma once
// ResourceLock: the object a LeaderElector competes for (client-go's resourcelock.Interface), and
// the record it holds.

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "kinformer/client/result.h"

namespace kinformer::controller {

/// A time as a Lease's acquireTime and renewTime carry it (metav1.MicroTime: UTC, microseconds).
using MicroTime = std::chrono::sys_time<std::chrono::microseconds>;

/// Who holds a lock, for how long, and since when (client-go's LeaderElectionRecord; a Lease's
/// spec). The times are the writer's wall clock: an elector never compares them with its own clock,
/// it only notices that they changed. Value type.
struct LeaderElectionRecord {
  /// The holder's identity; empty when nobody holds the lock (e.g. after a release).
  std::string holder_identity;
  /// How long the holder's claim lasts after a change of the record was observed.
  int lease_duration_seconds = 0;
  std::optional<MicroTime> acquire_time;
  std::optional<MicroTime> renew_time;
  /// How often the holder changed.
  int leader_transitions = 0;

  bool operator==(const LeaderElectionRecord&) const = default;
};

/// What a lock's watch tells: the record as it is now, or nullopt when the object is gone.
/// Called from the watch's thread, one call at a time; it must be quick and must not call into
/// the lock.
using RecordChanged = std::function<void(const std::optional<LeaderElectionRecord>& record)>;

/// A running watch of a lock's record (ResourceLock::watch). Destruction stops it: it returns
/// after the last call of its RecordChanged, and none follows.
class RecordWatch {
 public:
  virtual ~RecordWatch() = default;
};

using RecordWatchPtr = std::unique_ptr<RecordWatch>;

/// The object a LeaderElector reads and writes. Writes are guarded by optimistic concurrency: an
/// update() is based on the object as last read or written by this lock and fails (an Errc::api
/// error with http_status 409) when another writer changed it since.
/// Thread-safety: not thread-safe; one LeaderElector uses it from its own thread.
class ResourceLock {
 public:
  virtual ~ResourceLock() = default;
  /// Reads the record. When the object does not exist: an Errc::api error with http_status 404.
  virtual client::Result<LeaderElectionRecord> get() = 0;
  /// Creates the object holding `record`; 409 (AlreadyExists) when it exists.
  virtual client::Status create(const LeaderElectionRecord& record) = 0;
  /// Writes `record` over the object as this lock last read or wrote it; 409 when another wrote
  /// since. Fails (Errc::api 404) when the lock has neither read nor written it yet.
  virtual client::Status update(const LeaderElectionRecord& record) = 0;
  /// "namespace/name", for log lines.
  [[nodiscard]] virtual std::string describe() const = 0;
  /// Optional: starts telling `changed` the record each time the object changes (and once at
  /// the start), from a thread of the watch's, resumed with backoff after failures, until the
  /// returned watch is destroyed (before the lock). It runs beside the lock's other calls, which
  /// it does not touch. The default returns null: the lock cannot, and a LeaderElector learns of
  /// changes only when it reads the record at its tries.
  // NOLINTNEXTLINE(performance-unnecessary-value-param): a sink; implementations keep it
  virtual RecordWatchPtr watch(RecordChanged /*changed*/) { return nullptr; }
};

using ResourceLockPtr = std::unique_ptr<ResourceLock>;

/// True for the error of an absent object (HTTP 404).
[[nodiscard]] inline bool is_not_found(const client::Error& error) noexcept {
  return error.code == client::Errc::api && error.http_status == 404;
}
/// True for an optimistic-concurrency conflict or an object that exists already (HTTP 409).
[[nodiscard]] inline bool is_conflict(const client::Error& error) noexcept {
  return error.code == client::Errc::api && error.http_status == 409;
}

}  // namespace kinformer::controller
