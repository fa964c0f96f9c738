#pragma once
// ObservedListerWatcher: the informer's view of its reflector's requests. It sits between the
// Reflector and the client's ListerWatcher, counts every LIST page and watch opening it passes
// on (kinformer_requests_total{verb}), counts failures by a bounded reason
// (kinformer_request_errors_total{verb,reason}) and remembers the latest one for
// SharedInformer::last_error(). It changes nothing it passes on.

#include <cstdint>
#include <mutex>
#include <optional>

#include "kinformer/client/watch.h"
#include "kinformer/informer/metrics.h"
#include "kinformer/informer/sync_error.h"

namespace kinformer::informer::detail {

/// list()/watch() are called from the reflector's thread; last_error() from any thread.
/// Thread-safe. `inner` and `metrics` must outlive it.
class ObservedListerWatcher final : public client::ListerWatcher {
 public:
  ObservedListerWatcher(client::ListerWatcher& inner, InformerMetrics& metrics)
      : inner_(inner), metrics_(metrics) {}

  client::Result<client::ObjectList> list(const client::ListOptions& options) override;
  client::Result<client::WatchStreamPtr> watch(const client::ListOptions& options) override;

  /// The latest failed request while no later request succeeded; nullopt once one did (or
  /// before any failed). A cancellation (shutdown) is neither a failure nor a success.
  [[nodiscard]] std::optional<SyncError> last_error() const;

 private:
  // Records the outcome of one request of `verb`; `error` null: it succeeded.
  void record(const char* verb, const client::Error* error);

  client::ListerWatcher& inner_;
  InformerMetrics& metrics_;
  mutable std::mutex mu_;
  std::optional<SyncError> last_error_;  // guarded by mu_
  std::uint64_t consecutive_ = 0;        // guarded by mu_
};

}  // namespace kinformer::informer::detail
