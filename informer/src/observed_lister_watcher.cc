#include "observed_lister_watcher.h"

namespace kinformer::informer::detail {

client::Result<client::ObjectList> ObservedListerWatcher::list(const client::ListOptions& options) {
  metrics_.list_requests.increment();
  auto r = inner_.list(options);
  record("list", r ? nullptr : &r.error());
  return r;
}

client::Result<client::WatchStreamPtr> ObservedListerWatcher::watch(
    const client::ListOptions& options) {
  metrics_.watch_requests.increment();
  auto r = inner_.watch(options);
  record("watch", r ? nullptr : &r.error());
  return r;
}

std::optional<SyncError> ObservedListerWatcher::last_error() const {
  std::lock_guard lock(mu_);
  return last_error_;
}

void ObservedListerWatcher::record(const char* verb, const client::Error* error) {
  if (error != nullptr && error->code == client::Errc::cancelled) return;  // shutdown
  std::lock_guard lock(mu_);
  if (error == nullptr) {
    consecutive_ = 0;
    last_error_.reset();
    return;
  }
  std::string_view reason = error_reason(*error);
  metrics_.request_errors(verb, reason).increment();
  last_error_ = SyncError{verb, std::string(reason), *error, ++consecutive_};
}

}  // namespace kinformer::informer::detail
