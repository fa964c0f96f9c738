#pragma once
// LeaseWatch: LeaseLock::watch(), one Lease watched by a Reflector (list, then watch, resumed
// with backoff), its record handed to a RecordChanged.

#include <memory>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "kinformer/client/log.h"
#include "kinformer/client/rest_client.h"
#include "kinformer/controller/resource_lock.h"
#include "kinformer/informer/reflector.h"

namespace kinformer::controller::detail {

/// Watches the Lease `name` in `ns` (a list and watch through `client`'s lister-watcher, which
/// keeps what it needs of the client, with fieldSelector metadata.name=NAME) and calls `changed`
/// with its record after each list and each event (nullopt when it is absent or deleted). A Lease
/// that does not decode is logged and skipped. Failures are the Reflector's: retried with its
/// backoff, a 410 relists.
/// Threads: one of its own, running the reflector's loop (its blocking calls go to the
/// informers' shared pool); `changed` runs there. Destruction stops the loop and joins it.
class LeaseWatch final : public RecordWatch, private informer::ReflectorSink {
 public:
  LeaseWatch(client::RestClient& client, const std::string& ns, std::string name,
             const client::LogSink& log, RecordChanged changed);
  ~LeaseWatch() override;
  LeaseWatch(const LeaseWatch&) = delete;
  LeaseWatch& operator=(const LeaseWatch&) = delete;

 private:
  void on_replace(std::vector<client::ObjectPtr> items,
                  const std::string& resource_version) override;
  void on_event(client::EventType type, client::ObjectPtr object) override;
  void on_resource_version(const std::string& /*resource_version*/) override {}

  void tell(const client::ObjectPtr& lease);

  const std::string name_;
  const client::Logger log_;
  const RecordChanged changed_;
  client::ListerWatcherPtr lister_watcher_;
  std::unique_ptr<informer::Reflector> reflector_;
  std::jthread thread_;  // last: stopped and joined first
};

}  // namespace kinformer::controller::detail
