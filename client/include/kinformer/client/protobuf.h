#pragma once
// Kubernetes' protobuf wire format (application/vnd.kubernetes.protobuf) for the typed models:
// Pod, Secret, Endpoints, EndpointSlice, their lists, and metav1.Status. Decoded straight into
// the models, without intermediate message objects. docs/protobuf.md has the wire facts and
// their sources.

#include <memory>
#include <string_view>

#include "kinformer/client/error.h"
#include "kinformer/client/object.h"
#include "kinformer/client/resource.h"
#include "kinformer/client/result.h"
#include "kinformer/client/watch.h"

namespace kinformer::client {

/// The media type of a protobuf object or list response.
inline constexpr std::string_view kProtobufContentType = "application/vnd.kubernetes.protobuf";
/// The media type of a protobuf watch response (length-delimited frames).
inline constexpr std::string_view kProtobufWatchContentType =
    "application/vnd.kubernetes.protobuf;stream=watch";
/// Every protobuf body (and every object inside a watch event) starts with these 4 bytes,
/// followed by a runtime.Unknown message.
inline constexpr std::string_view kProtobufMagic{"k8s\0", 4};

/// Decodes the objects of one built-in resource from protobuf. It fills exactly the fields the
/// resource's JSON Codec fills, with the same defaults (e.g. protocol "TCP" when unset);
/// unknown fields are skipped; a known field with the wrong wire type, or bytes that are not
/// protobuf, is an Errc::decode error naming the field ("Pod ns/p: spec.containers[0].ports[1]:
/// ..."), never a value. Stateless and thread-safe: no concurrent call causes a data race.
class ProtobufCodec {
 public:
  virtual ~ProtobufCodec() = default;
  /// The resource (its kind names errors and is checked against the envelope's typeMeta).
  [[nodiscard]] virtual const GroupVersionResource& gvr() const = 0;
  /// Decodes one object message: the `raw` bytes of a runtime.Unknown, without magic or
  /// envelope.
  [[nodiscard]] virtual Result<std::shared_ptr<Object>> decode(std::string_view message) const = 0;
};

using ProtobufCodecPtr = std::shared_ptr<const ProtobufCodec>;

/// The protobuf codec of a typed model's resource type (ResourceTraits<Pod>::type() ...), or
/// nullptr for anything else: dynamic objects and custom resources stay JSON (the API server
/// serves custom resources only as JSON). Matched by the type's JSON codec, so a DynamicObject
/// ResourceType for "pods" gets nullptr.
ProtobufCodecPtr protobuf_codec(const ResourceType& type);

/// Decodes an object response body (magic, runtime.Unknown with typeMeta.kind == the codec's
/// kind, raw = the object). Errc::decode when it is not that.
Result<ObjectPtr> decode_protobuf_object(const ProtobufCodec& codec, std::string_view body);

/// Decodes a list response body (kind "<Kind>List"): ListMeta resourceVersion and continue,
/// and the items. An item that fails names its index ("pods list item 3: Pod ns/p: ...").
Result<ObjectList> decode_protobuf_list(const ProtobufCodec& codec, std::string_view body);

/// Decodes a metav1.Status message (the `raw` of an envelope of kind "Status") into `status`, an
/// Errc::api Error, as error_from_status() does for JSON: http_status = code (500 when unset),
/// reason, message, details.retryAfterSeconds (capped at kMaxRetryAfter), details.causes[].reason
/// (at most 16). The message stays empty when the Status has none (callers say what failed).
/// Returns Errc::decode (and leaves `status` unspecified) when the message is malformed.
Status decode_protobuf_status(std::string_view message, Error& status);

/// Maps a non-2xx response whose body is protobuf (as a server answers a client that accepts
/// protobuf) to an Errc::api Error, like error_from_response() for JSON. A body that is not a
/// protobuf Status keeps only its size in the message (it may be an object, e.g. a Secret).
Error error_from_protobuf_response(int http_status, std::string_view body,
                                   std::string_view retry_after_header = {});

}  // namespace kinformer::client
