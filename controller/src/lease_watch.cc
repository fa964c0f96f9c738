#include "lease_watch.h"

#include <utility>

#include "kinformer/client/dynamic_object.h"
#include "kinformer/controller/lease_lock.h"
#include "kinformer/informer/clock.h"

namespace kinformer::controller::detail {

LeaseWatch::LeaseWatch(client::RestClient& client, const std::string& ns, std::string name,
                       const client::LogSink& log, RecordChanged changed)
    : name_(std::move(name)),
      log_(log, "leader-election", {{"lease", ns + "/" + name_}}),
      changed_(std::move(changed)),
      lister_watcher_(client.lister_watcher(lease_resource(), ns)) {
  informer::ReflectorOptions o;
  o.name = "leases/" + ns + "/" + name_;
  o.log = log_;
  o.field_selector = "metadata.name=" + name_;
  // Its own time, never the elector's injected clock: the elector's waits are the elector's.
  o.clock = informer::system_clock();
  o.random = informer::default_random();
  reflector_ = std::make_unique<informer::Reflector>(*lister_watcher_,
                                                     static_cast<ReflectorSink&>(*this), o);
  thread_ = std::jthread([this](const std::stop_token& stop) { reflector_->run(stop); });
}

LeaseWatch::~LeaseWatch() {
  // Before any member goes: the loop calls back into this object.
  thread_.request_stop();
  if (thread_.joinable()) thread_.join();
}

void LeaseWatch::on_replace(std::vector<client::ObjectPtr> items,
                            const std::string& /*resource_version*/) {
  for (const auto& item : items) {
    if (item && item->metadata.name == name_) {
      tell(item);
      return;
    }
  }
  changed_(std::nullopt);
}

void LeaseWatch::on_event(client::EventType type, client::ObjectPtr object) {
  if (!object || object->metadata.name != name_) return;
  if (type == client::EventType::deleted) {
    changed_(std::nullopt);
    return;
  }
  tell(object);
}

void LeaseWatch::tell(const client::ObjectPtr& lease) {
  const auto* dynamic = dynamic_cast<const client::DynamicObject*>(lease.get());
  if (!dynamic) {
    log_.warn("watched lease not decoded as a dynamic object");
    return;
  }
  auto record = lease_record_from_json(dynamic->json);
  if (!record) {
    log_.warn("watched lease does not decode", {{"error", record.error().to_string()}});
    return;
  }
  changed_(*record);
}

}  // namespace kinformer::controller::detail
