// meta.v1 messages: ObjectMeta, OwnerReference, Time, ListMeta, Status.
// Field numbers: k8s.io/apimachinery pkg/apis/meta/v1/generated.proto (read at commit
// eed236ceee2c19c2753a3d93ac0631dc20750454); Time's encoding: pkg/apis/meta/v1/time_proto.go.

#include "kinformer/client/api_error.h"
#include "kinformer/client/protobuf.h"
#include "protobuf/decoders.h"

namespace kinformer::client::detail::pb {
namespace {

// meta.v1.Time {seconds = 1 int64, nanos = 2 int32}, kept as the JSON decoder keeps it: whole
// seconds (metav1.Time's JSON form has no fraction; its protobuf form drops nanos too). The zero
// time is an empty message (time_proto.go) and reads as unset (JSON null). Years outside 0-9999
// cannot be written in RFC 3339 (Go's JSON marshalling refuses them too): an error.
bool decode_time(Message& parent, const char* name, std::optional<Timestamp>& out) {
  std::string_view bytes;
  if (!parent.message(name, bytes)) return false;
  if (bytes.empty()) {
    out.reset();
    return true;
  }
  const FieldPath at = parent.at().child(name);
  Message m(parent.decoder(), bytes, at);
  std::int64_t secs = 0;
  while (m.next()) {
    switch (m.tag()) {
      case 1:
        m.int64("seconds", secs);
        break;
      default:
        m.skip();  // nanos (2): not kept, as in JSON
    }
  }
  if (parent.decoder().failed()) return false;
  out = Timestamp::from_unix_seconds(secs);
  if (!out) {
    parent.decoder().fail(parent.at(), name, "a time outside the years 0-9999");
    return false;
  }
  return true;
}

// OwnerReference {kind = 1, name = 3, uid = 4, apiVersion = 5, controller = 6,
// blockOwnerDeletion = 7}.
void decode_owner_reference(Message& m, OwnerReference& ref) {
  while (m.next()) {
    switch (m.tag()) {
      case 1:
        m.string("kind", ref.kind);
        break;
      case 3:
        m.string("name", ref.name);
        break;
      case 4:
        m.string("uid", ref.uid);
        break;
      case 5:
        m.string("apiVersion", ref.api_version);
        break;
      case 6:
        m.boolean("controller", ref.controller);
        break;
      case 7:
        m.boolean("blockOwnerDeletion", ref.block_owner_deletion);
        break;
      default:
        m.skip();
    }
  }
}

}  // namespace

// ObjectMeta {name = 1, generateName = 2, namespace = 3, selfLink = 4, uid = 5,
// resourceVersion = 6, generation = 7, creationTimestamp = 8, deletionTimestamp = 9,
// deletionGracePeriodSeconds = 10, labels = 11, annotations = 12, ownerReferences = 13,
// finalizers = 14, managedFields = 17 (skipped, never kept)}.
void decode_object_meta(Message& m, ObjectMeta& meta) {
  const FieldPath& at = m.at();
  while (m.next()) {
    switch (m.tag()) {
      case 1:
        m.string("name", meta.name);
        break;
      case 2:
        m.string("generateName", meta.generate_name);
        break;
      case 3:
        m.string("namespace", meta.namespace_);
        break;
      case 5:
        m.string("uid", meta.uid);
        break;
      case 6:
        m.string("resourceVersion", meta.resource_version);
        break;
      case 7:
        m.int64("generation", meta.generation);
        break;
      case 8: {
        std::optional<Timestamp> created;
        if (decode_time(m, "creationTimestamp", created)) {
          meta.creation_timestamp = created.value_or(Timestamp{});
        }
        break;
      }
      case 9:
        decode_time(m, "deletionTimestamp", meta.deletion_timestamp);
        break;
      case 11:
        map_entry(m, "labels", meta.labels);
        break;
      case 12:
        map_entry(m, "annotations", meta.annotations);
        break;
      case 13: {
        std::string_view bytes;
        if (!m.message("ownerReferences", bytes)) break;
        const FieldPath list_at = at.child("ownerReferences");
        const FieldPath ref_at = list_at.element(meta.owner_references.size());
        Message r(m.decoder(), bytes, ref_at);
        decode_owner_reference(r, meta.owner_references.emplace_back());
        break;
      }
      case 14:
        m.string("finalizers", meta.finalizers.emplace_back());
        break;
      default:
        m.skip();
    }
  }
  finish_map(meta.labels);
  finish_map(meta.annotations);
}

void decode_list_meta(Message& m, std::string& resource_version, std::string& continue_token) {
  while (m.next()) {
    switch (m.tag()) {
      case 2:
        m.string("resourceVersion", resource_version);
        break;
      case 3:
        m.string("continue", continue_token);
        break;
      default:
        m.skip();  // selfLink = 1, remainingItemCount = 4, shardInfo = 5
    }
  }
}

}  // namespace kinformer::client::detail::pb

namespace kinformer::client {

using detail::FieldPath;
using detail::pb::Decoder;
using detail::pb::Message;

// Status {metadata = 1, status = 2, message = 3, reason = 4, details = 5, code = 6};
// StatusDetails {name = 1, group = 2, kind = 3, causes = 4, retryAfterSeconds = 5, uid = 6};
// StatusCause {reason = 1, message = 2, field = 3}.
Status decode_protobuf_status(std::string_view message, Error& e) {
  constexpr std::size_t kMaxCauses = 16;  // bounded: a Status is untrusted input
  e = Error{};
  e.code = Errc::api;
  std::int32_t code = 0;
  std::int32_t retry_after = 0;
  Decoder d("Status", nullptr);
  const FieldPath root;
  Message m(d, message, root);
  while (m.next()) {
    switch (m.tag()) {
      case 3:
        m.string("message", e.message);
        break;
      case 4:
        m.string("reason", e.reason);
        break;
      case 6:
        m.int32("code", code);
        break;
      case 5: {
        std::string_view details;
        if (!m.message("details", details)) break;
        const FieldPath details_at = root.child("details");
        Message dm(d, details, details_at);
        std::size_t cause_index = 0;
        while (dm.next()) {
          switch (dm.tag()) {
            case 5:
              dm.int32("retryAfterSeconds", retry_after);
              break;
            case 4: {
              std::string_view cause;
              if (!dm.message("causes", cause)) break;
              const FieldPath causes_at = details_at.child("causes");
              const FieldPath cause_at = causes_at.element(cause_index++);
              Message cm(d, cause, cause_at);
              std::string reason;
              while (cm.next()) {
                if (cm.tag() == 1) {
                  cm.string("reason", reason);
                } else {
                  cm.skip();
                }
              }
              if (e.causes.size() < kMaxCauses) e.causes.push_back(std::move(reason));
              break;
            }
            default:
              dm.skip();
          }
        }
        break;
      }
      default:
        m.skip();
    }
  }
  if (auto s = std::move(d).status(); !s) return s;
  e.http_status = code > 0 ? code : 500;
  if (retry_after > 0) e.retry_after = std::min(std::chrono::seconds(retry_after), kMaxRetryAfter);
  return Ok{};
}

}  // namespace kinformer::client
