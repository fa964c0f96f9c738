#pragma once
// Private: the message decoders behind ProtobufCodec, one per kept message. Each reads the
// fields the JSON decoder of the same model reads and skips the rest.

#include <string>
#include <string_view>

#include "kinformer/client/endpoint_slice.h"
#include "kinformer/client/endpoints.h"
#include "kinformer/client/pod.h"
#include "kinformer/client/secret.h"
#include "protobuf/wire.h"

namespace kinformer::client::detail::pb {

/// meta.v1.ObjectMeta (the object's field 1, "metadata") into `meta`.
void decode_object_meta(Message& m, ObjectMeta& meta);

/// meta.v1.ListMeta (a list's field 1): resourceVersion = 2, continue = 3.
void decode_list_meta(Message& m, std::string& resource_version, std::string& continue_token);

/// The fields of each model beyond metadata (field 1 of every object, read before these).
void decode_pod(Message& m, Pod& pod);
void decode_secret(Message& m, Secret& secret);
void decode_endpoints(Message& m, Endpoints& endpoints);
void decode_endpoint_slice(Message& m, EndpointSlice& slice);

}  // namespace kinformer::client::detail::pb
