#pragma once
// How a shard's endpoints are built from one cluster's inputs (EndpointSlices or core/v1
// Endpoints): pure functions, no state. EndpointIndex joins the Pods and keeps the result.

#include <map>
#include <optional>
#include <string>

#include "kinformer/client/endpoint_slice.h"
#include "kinformer/client/endpoints.h"
#include "kinformer/mesh/endpoint_index.h"

namespace kinformer::mesh::detail {

/// Endpoints by address: an address added again replaces the earlier one.
using EndpointsByAddress = std::map<std::string, Endpoint>;

/// "namespace/name" of the Pod an endpoint's targetRef names ("" when it names no Pod; an empty
/// namespace is the object's own).
[[nodiscard]] std::string pod_key(const std::optional<client::ObjectReference>& ref,
                                  const std::string& object_namespace);

/// Adds the endpoints of one slice (the first address of each, as the API says addresses are
/// fungible); an address already present is replaced.
void add_slice(const client::EndpointSlice& slice, EndpointsByAddress& out);

/// Adds the ready and not-ready addresses of every subset of a core/v1 Endpoints.
void add_endpoints(const client::Endpoints& endpoints, EndpointsByAddress& out);

}  // namespace kinformer::mesh::detail
