#pragma once
// discovery.k8s.io/v1 EndpointSlice: the primary endpoint source (core/v1 Endpoints is
// deprecated since Kubernetes 1.33).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kinformer/client/object.h"
#include "kinformer/client/resource.h"

namespace kinformer::client {

/// One endpoint of a slice. Unset conditions mean "unknown" (the API treats unknown ready as
/// ready).
struct SliceEndpoint {
  std::vector<std::string> addresses;
  std::optional<bool> ready;
  std::optional<bool> serving;
  std::optional<bool> terminating;
  InternedString hostname;
  InternedString node_name;
  InternedString zone;
  std::optional<ObjectReference> target_ref;
  bool operator==(const SliceEndpoint&) const = default;
};

struct SlicePort {
  InternedString name;
  std::optional<std::int32_t> port;  ///< unset = all ports
  InternedString protocol;           ///< "TCP" when unset by the server
  InternedString app_protocol;
  bool operator==(const SlicePort&) const = default;
};

/// Thread-safety: immutable once stored.
class EndpointSlice final : public Object {
 public:
  InternedString address_type;  ///< "IPv4", "IPv6" or "FQDN"
  std::vector<SliceEndpoint> endpoints;
  std::vector<SlicePort> ports;
  /// The owning Service: label kubernetes.io/service-name ("" when absent).
  [[nodiscard]] std::string service_name() const;
};

template <>
struct ResourceTraits<EndpointSlice> {
  static const ResourceType& type();
};

}  // namespace kinformer::client
