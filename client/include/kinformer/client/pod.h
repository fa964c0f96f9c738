#pragma once
// core/v1 Pod: the fields mesh components read (placement, identity, ports, addresses, readiness).

#include <cstdint>
#include <string>
#include <vector>

#include "kinformer/client/object.h"
#include "kinformer/client/resource.h"

namespace kinformer::client {

/// spec.containers[i].ports[j].
struct ContainerPort {
  InternedString name;
  std::int32_t container_port = 0;
  InternedString protocol;  ///< "TCP" when unset by the server
  bool operator==(const ContainerPort&) const = default;
};

/// spec.containers[i]: name, image and declared ports (resources, env, probes ... are not kept).
struct Container {
  InternedString name;
  InternedString image;
  std::vector<ContainerPort> ports;
  bool operator==(const Container&) const = default;
};

/// status.conditions[i]: type ("Ready", "PodScheduled", ...) and status ("True", "False",
/// "Unknown"). Reasons, messages and timestamps are not kept.
struct PodCondition {
  InternedString type;
  InternedString status;
  bool operator==(const PodCondition&) const = default;
};

/// A Pod, kept lean: every cached Pod costs memory in every process that watches Pods, so only
/// what mesh components read is decoded; everything else in the JSON is skipped. Strings that
/// repeat across Pods are interned (InternedString); the Pod's own IPs are not.
/// Thread-safety: immutable once stored.
class Pod final : public Object {
 public:
  // spec
  InternedString node_name;
  InternedString service_account_name;
  bool host_network = false;
  std::vector<Container> containers;
  // status
  InternedString phase;  ///< "Pending", "Running", "Succeeded", "Failed", "Unknown"
  std::string pod_ip;
  std::vector<std::string> pod_ips;  ///< status.podIPs[i].ip (dual stack: one per family)
  InternedString host_ip;            ///< shared by the Pods of a node
  std::vector<PodCondition> conditions;

  /// True when condition "Ready" has status "True" (the kubelet's readiness, as EndpointSlice
  /// controllers use it).
  [[nodiscard]] bool ready() const noexcept;
};

template <>
struct ResourceTraits<Pod> {
  static const ResourceType& type();
};

}  // namespace kinformer::client
