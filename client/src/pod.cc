#include "kinformer/client/pod.h"

#include "detail/fields.h"
#include "detail/typed_codec.h"

namespace kinformer::client {
namespace {

using detail::FieldPath;
using detail::FieldReader;

void decode_container(FieldReader& r, const JsonValue& c, const FieldPath& at, Container& out) {
  r.string(c, at, "name", out.name);
  r.string(c, at, "image", out.image);
  const FieldPath ports_at = at.child("ports");
  if (const JsonValue* ports = r.array(c, at, "ports")) {
    out.ports.reserve(ports->Size());
    std::size_t i = 0;
    for (const auto& p : ports->GetArray()) {
      const FieldPath port_at = ports_at.element(i++);
      if (!r.expect_object(p, port_at)) break;
      ContainerPort& port = out.ports.emplace_back();
      r.string(p, port_at, "name", port.name);
      r.int32(p, port_at, "containerPort", port.container_port);
      r.string(p, port_at, "protocol", port.protocol);
      if (port.protocol.empty()) port.protocol = "TCP";
    }
  }
}

void decode_spec(FieldReader& r, const JsonValue& spec, const FieldPath& at, Pod& pod) {
  r.string(spec, at, "nodeName", pod.node_name);
  r.string(spec, at, "serviceAccountName", pod.service_account_name);
  r.boolean(spec, at, "hostNetwork", pod.host_network);
  const FieldPath containers_at = at.child("containers");
  if (const JsonValue* containers = r.array(spec, at, "containers")) {
    pod.containers.reserve(containers->Size());
    std::size_t i = 0;
    for (const auto& c : containers->GetArray()) {
      const FieldPath container_at = containers_at.element(i++);
      if (!r.expect_object(c, container_at)) break;
      decode_container(r, c, container_at, pod.containers.emplace_back());
    }
  }
}

void decode_status(FieldReader& r, const JsonValue& status, const FieldPath& at, Pod& pod) {
  r.string(status, at, "phase", pod.phase);
  r.string(status, at, "podIP", pod.pod_ip);
  r.string(status, at, "hostIP", pod.host_ip);
  const FieldPath ips_at = at.child("podIPs");
  if (const JsonValue* ips = r.array(status, at, "podIPs")) {
    pod.pod_ips.reserve(ips->Size());
    std::size_t i = 0;
    for (const auto& ip : ips->GetArray()) {
      const FieldPath ip_at = ips_at.element(i++);
      if (!r.expect_object(ip, ip_at)) break;
      r.string(ip, ip_at, "ip", pod.pod_ips.emplace_back());
    }
  }
  const FieldPath conditions_at = at.child("conditions");
  if (const JsonValue* conditions = r.array(status, at, "conditions")) {
    pod.conditions.reserve(conditions->Size());
    std::size_t i = 0;
    for (const auto& c : conditions->GetArray()) {
      const FieldPath condition_at = conditions_at.element(i++);
      if (!r.expect_object(c, condition_at)) break;
      PodCondition& condition = pod.conditions.emplace_back();
      r.string(c, condition_at, "type", condition.type);
      r.string(c, condition_at, "status", condition.status);
    }
  }
}

Status decode(const JsonValue& v, Pod& pod) {
  FieldReader r("Pod", pod);
  const FieldPath root;
  if (const JsonValue* spec = r.object(v, root, "spec")) {
    decode_spec(r, *spec, root.child("spec"), pod);
  }
  if (const JsonValue* status = r.object(v, root, "status")) {
    decode_status(r, *status, root.child("status"), pod);
  }
  return std::move(r).status();
}

void encode(detail::JsonWriter& w, const Pod& pod) {
  w.Key("spec");
  w.StartObject();
  detail::key_string(w, "nodeName", pod.node_name);
  detail::key_string(w, "serviceAccountName", pod.service_account_name);
  if (pod.host_network) (w.Key("hostNetwork"), w.Bool(true));
  w.Key("containers");
  w.StartArray();
  for (const auto& c : pod.containers) {
    w.StartObject();
    detail::key_string(w, "name", c.name);
    detail::key_string(w, "image", c.image);
    if (!c.ports.empty()) {
      w.Key("ports");
      w.StartArray();
      for (const auto& p : c.ports) {
        w.StartObject();
        detail::key_string(w, "name", p.name);
        w.Key("containerPort");
        w.Int(p.container_port);
        detail::key_string(w, "protocol", p.protocol);
        w.EndObject();
      }
      w.EndArray();
    }
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();

  // Status is ignored by the server on create/update of the main resource, and kept for
  // round trips and status updates.
  w.Key("status");
  w.StartObject();
  detail::key_string(w, "phase", pod.phase);
  detail::key_string(w, "podIP", pod.pod_ip);
  if (!pod.pod_ips.empty()) {
    w.Key("podIPs");
    w.StartArray();
    for (const auto& ip : pod.pod_ips) {
      w.StartObject();
      detail::key_string(w, "ip", ip);
      w.EndObject();
    }
    w.EndArray();
  }
  detail::key_string(w, "hostIP", pod.host_ip);
  if (!pod.conditions.empty()) {
    w.Key("conditions");
    w.StartArray();
    for (const auto& c : pod.conditions) {
      w.StartObject();
      detail::key_string(w, "type", c.type);
      detail::key_string(w, "status", c.status);
      w.EndObject();
    }
    w.EndArray();
  }
  w.EndObject();
}

}  // namespace

bool Pod::ready() const noexcept {
  for (const auto& c : conditions) {
    if (c.type == "Ready") return c.status == "True";
  }
  return false;
}

const ResourceType& ResourceTraits<Pod>::type() {
  static const ResourceType t =
      detail::make_type<Pod>({"", "v1", "pods", "Pod", true}, decode, encode);
  return t;
}

}  // namespace kinformer::client
