#pragma once
// LeaseLock: a ResourceLock on a coordination.k8s.io/v1 Lease (client-go's resourcelock.LeaseLock).

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "kinformer/client/dynamic_object.h"
#include "kinformer/client/log.h"
#include "kinformer/client/rest_client.h"
#include "kinformer/controller/resource_lock.h"

namespace kinformer::controller {

/// The coordination.k8s.io/v1 leases resource, decoded as client::DynamicObject.
const client::ResourceType& lease_resource();

/// Reads and writes one Lease through a RestClient. An update() changes only the Lease's spec
/// fields of the record (holderIdentity, leaseDurationSeconds, acquireTime, renewTime,
/// leaseTransitions) in the Lease as last read or written, so labels, annotations and other spec
/// fields are kept, and sends it with that resourceVersion. watch() lists and watches the Lease
/// (fieldSelector metadata.name=NAME) with an informer::Reflector on a thread of its own.
/// Thread-safety: not thread-safe (one LeaderElector uses it); a watch runs beside the other
/// calls. Lifetime: shares the client; a watch shares it too.
class LeaseLock final : public ResourceLock {
 public:
  /// Throws client::ConfigError when `client` is null or `ns` or `name` is empty. `log` is where
  /// a watch logs (component "leader-election", field lease=namespace/name); null: stderr.
  LeaseLock(std::shared_ptr<client::RestClient> client, std::string ns, std::string name,
            client::LogSink log = {});

  client::Result<LeaderElectionRecord> get() override;
  client::Status create(const LeaderElectionRecord& record) override;
  client::Status update(const LeaderElectionRecord& record) override;
  [[nodiscard]] std::string describe() const override;
  RecordWatchPtr watch(RecordChanged changed) override;

 private:
  client::Status keep(client::Result<client::ObjectPtr> written);

  const std::shared_ptr<client::RestClient> client_;
  const std::string namespace_;
  const std::string name_;
  const client::LogSink log_;
  std::shared_ptr<const client::DynamicObject> lease_;  // as last read or written
};

/// Reads a Lease's record from its JSON (a Lease object). An Errc::decode error names the field
/// of a wrong type.
client::Result<LeaderElectionRecord> lease_record_from_json(std::string_view lease_json);
/// The Lease JSON `lease_json` with the record's spec fields replaced; absent times are removed.
client::Result<std::string> lease_json_with_record(std::string_view lease_json,
                                                   const LeaderElectionRecord& record);
/// A MicroTime as the API server writes it: "2024-05-01T10:00:00.123456Z".
std::string format_micro_time(MicroTime time);
/// Reads RFC 3339 with an optional fraction (digits beyond microseconds dropped) and offset.
std::optional<MicroTime> parse_micro_time(std::string_view text);

}  // namespace kinformer::controller
