#pragma once
// core/v1 Endpoints. Deprecated since Kubernetes 1.33 (every request gets a "Warning: 299"
// header); use EndpointSlice where the cluster serves it and this model for older clusters.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kinformer/client/object.h"
#include "kinformer/client/resource.h"

namespace kinformer::client {

/// subsets[i].addresses[j] / notReadyAddresses[j].
struct EndpointAddress {
  std::string ip;
  InternedString hostname;
  InternedString node_name;
  std::optional<ObjectReference> target_ref;
  bool operator==(const EndpointAddress&) const = default;
};

/// subsets[i].ports[j].
struct EndpointPort {
  InternedString name;  ///< may be empty when the subset has a single port
  std::int32_t port = 0;
  InternedString protocol;  ///< "TCP" when unset by the server
  InternedString app_protocol;
  bool operator==(const EndpointPort&) const = default;
};

/// One subset: every address in it serves every port in it.
struct EndpointSubset {
  std::vector<EndpointAddress> addresses;
  std::vector<EndpointAddress> not_ready_addresses;
  std::vector<EndpointPort> ports;
  bool operator==(const EndpointSubset&) const = default;
};

/// The endpoints of one Service. Empty `subsets` is a real state (no endpoints), not "unknown".
/// Thread-safety: immutable once stored.
class Endpoints final : public Object {
 public:
  std::vector<EndpointSubset> subsets;
};

template <>
struct ResourceTraits<Endpoints> {
  static const ResourceType& type();
};

}  // namespace kinformer::client
