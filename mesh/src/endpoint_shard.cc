#include "endpoint_shard.h"

#include <algorithm>
#include <vector>

namespace kinformer::mesh::detail {
namespace {

// Sorted by name, one port per name.
std::vector<EndpointPort> by_name(std::vector<EndpointPort> ports) {
  std::sort(ports.begin(), ports.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  ports.erase(std::unique(ports.begin(), ports.end(),
                          [](const auto& a, const auto& b) { return a.name == b.name; }),
              ports.end());
  return ports;
}

}  // namespace

std::string pod_key(const std::optional<client::ObjectReference>& ref,
                    const std::string& object_namespace) {
  if (!ref || ref->kind != "Pod" || ref->name.empty()) return {};
  return client::make_key(ref->namespace_.empty() ? object_namespace : ref->namespace_.str(),
                          ref->name);
}

void add_slice(const client::EndpointSlice& slice, EndpointsByAddress& out) {
  std::vector<EndpointPort> ports;
  for (const auto& p : slice.ports) {
    if (!p.port) continue;  // "all ports": nothing a proxy can route to by name
    ports.push_back({p.name, *p.port, p.protocol, p.app_protocol});
  }
  ports = by_name(std::move(ports));
  for (const auto& se : slice.endpoints) {
    if (se.addresses.empty()) continue;
    Endpoint e;
    e.address = se.addresses.front();
    e.ports = ports;
    e.ready = se.ready.value_or(true);
    e.serving = se.serving.value_or(e.ready);
    e.terminating = se.terminating.value_or(false);
    e.hostname = se.hostname;
    e.node_name = se.node_name;
    e.zone = se.zone;
    e.target_ref = se.target_ref;
    out.insert_or_assign(e.address, std::move(e));
  }
}

void add_endpoints(const client::Endpoints& endpoints, EndpointsByAddress& out) {
  for (const auto& subset : endpoints.subsets) {
    std::vector<EndpointPort> ports;
    ports.reserve(subset.ports.size());
    for (const auto& p : subset.ports) {
      ports.push_back({p.name, p.port, p.protocol, p.app_protocol});
    }
    ports = by_name(std::move(ports));
    auto add = [&](const client::EndpointAddress& a, bool ready) {
      if (a.ip.empty()) return;
      Endpoint e;
      e.address = a.ip;
      e.ports = ports;
      e.ready = ready;
      e.serving = ready;
      e.terminating = false;
      e.hostname = a.hostname;
      e.node_name = a.node_name;
      e.target_ref = a.target_ref;
      out.insert_or_assign(e.address, std::move(e));
    };
    for (const auto& a : subset.addresses) add(a, true);
    for (const auto& a : subset.not_ready_addresses) add(a, false);
  }
}

}  // namespace kinformer::mesh::detail
