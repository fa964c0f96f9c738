#pragma once
// The list/watch seam between client/ (which talks to the API server) and informer/ (which keeps
// caches true). informer/ depends only on these interfaces, so its tests can drive a fake.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "kinformer/client/object.h"
#include "kinformer/client/result.h"

namespace kinformer::client {

/// Query parameters shared by list and watch requests.
struct ListOptions {
  /// List only: a stop request ends the request's wait for the client's rate limiter (the list
  /// then fails with Errc::cancelled), so an informer's shutdown never waits for a token.
  std::stop_token stop;
  std::string label_selector;
  std::string field_selector;
  /// Unset: a consistent (quorum) read. "0": any version (served from the watch cache).
  std::optional<std::string> resource_version;
  /// "", "NotOlderThan" or "Exact".
  std::string resource_version_match;
  /// Page size for lists; 0 = no limit.
  std::int64_t limit = 0;
  std::string continue_token;
  /// Watch only: server-side timeout; 0 = server default.
  int timeout_seconds = 0;
  /// Watch only.
  bool allow_watch_bookmarks = false;
  /// Watch only: streaming list (WatchList), with resource_version_match "NotOlderThan".
  bool send_initial_events = false;
  /// Watch only, never sent: how long the stream may deliver no byte before the client closes it
  /// (the stream then fails with Errc::timeout, "watch idle"). 0: RestClientOptions::
  /// watch_idle_timeout, or when that is 0 too, the request's timeoutSeconds + 60 s.
  std::chrono::milliseconds idle_timeout{0};
};

/// One page of a list.
struct ObjectList {
  std::vector<ObjectPtr> items;
  std::string resource_version;
  std::string continue_token;  ///< empty on the last page
};

enum class EventType { added, modified, deleted, bookmark };

/// One decoded watch event. For bookmarks, `object` carries only metadata (resourceVersion and
/// annotations, e.g. "k8s.io/initial-events-end": "true").
struct WatchEvent {
  EventType type = EventType::added;
  ObjectPtr object;
};

/// An open watch. Owned by one reader.
/// Thread-safety: next() from one thread at a time; cancel() from any thread, at any time.
/// Destruction cancels and releases the connection.
class WatchStream {
 public:
  virtual ~WatchStream() = default;
  /// Blocks until the next event. Returns std::nullopt when the server ended the stream cleanly
  /// (e.g. timeoutSeconds elapsed) and an Error when it failed: a watch ERROR event becomes an
  /// Errc::api error with the Status code (410 Expired, 504 too large RV ...), a truncated or
  /// malformed stream Errc::truncated / Errc::decode, cancel() Errc::cancelled. After
  /// nullopt or an error, the stream is finished.
  virtual Result<std::optional<WatchEvent>> next() = 0;
  /// Makes a blocked or later next() return Errc::cancelled promptly. Idempotent.
  virtual void cancel() = 0;
  /// How many events next() would return now without blocking: already received and decoded.
  /// A hint for batching (the reflector hands consecutive buffered events to the informer
  /// together); 0, the default, means "unknown", and every event then goes on alone. From the
  /// thread that calls next().
  [[nodiscard]] virtual std::size_t buffered() const { return 0; }
  /// Changes the stream's read-idle deadline (ListOptions::idle_timeout) from the next read on:
  /// e.g. shorter once the server has shown it sends bookmarks. Any thread. The default does
  /// nothing (a stream without a deadline of its own).
  virtual void set_idle_timeout(std::chrono::milliseconds timeout) { (void)timeout; }
  /// Asks to be told when next() would not block (an event is queued, or the stream ended, failed
  /// or was cancelled), so that a reader needs no thread of its own while the stream is quiet.
  /// True: `wake` is called exactly once, at once on this thread when next() would not block
  /// now, else later from the thread that makes it ready (the client's io thread, or cancel()'s
  /// caller); `wake` must be quick and must not call into the stream. At most one request is
  /// outstanding; a new one replaces an earlier one not yet called. False, the default: not
  /// supported (a reader must block in next()). From the thread that calls next().
  // NOLINTNEXTLINE(performance-unnecessary-value-param): a sink; implementations keep it
  virtual bool notify_when_ready(std::function<void()> /*wake*/) { return false; }
};

using WatchStreamPtr = std::unique_ptr<WatchStream>;

/// Lists and watches one resource in one namespace (or all). Thread-safety: no concurrent call
/// causes a data race.
class ListerWatcher {
 public:
  virtual ~ListerWatcher() = default;
  /// One page of a list (the caller paginates with limit/continue_token).
  virtual Result<ObjectList> list(const ListOptions& options) = 0;
  /// Opens a watch. Errors of the initial HTTP response (403, 410, 429 ...) are returned here.
  virtual Result<WatchStreamPtr> watch(const ListOptions& options) = 0;
};

using ListerWatcherPtr = std::unique_ptr<ListerWatcher>;

}  // namespace kinformer::client
