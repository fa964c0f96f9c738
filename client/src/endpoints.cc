#include "kinformer/client/endpoints.h"

#include <vector>

#include "detail/fields.h"
#include "detail/typed_codec.h"

namespace kinformer::client {
namespace {

using detail::FieldPath;
using detail::FieldReader;

void decode_addresses(FieldReader& r, const JsonValue& subset, const FieldPath& at,
                      const char* name, std::vector<EndpointAddress>& out) {
  const JsonValue* addresses = r.array(subset, at, name);
  if (!addresses) return;
  const FieldPath list_at = at.child(name);
  out.reserve(addresses->Size());
  std::size_t i = 0;
  for (const auto& a : addresses->GetArray()) {
    const FieldPath address_at = list_at.element(i++);
    if (!r.expect_object(a, address_at)) return;
    EndpointAddress& address = out.emplace_back();
    r.string(a, address_at, "ip", address.ip);
    r.string(a, address_at, "hostname", address.hostname);
    r.string(a, address_at, "nodeName", address.node_name);
    if (const JsonValue* t = r.object(a, address_at, "targetRef")) {
      const FieldPath ref_at = address_at.child("targetRef");
      ObjectReference& ref = address.target_ref.emplace();
      r.string(*t, ref_at, "kind", ref.kind);
      r.string(*t, ref_at, "namespace", ref.namespace_);
      r.string(*t, ref_at, "name", ref.name);
      r.string(*t, ref_at, "uid", ref.uid);
    }
  }
}

Status decode(const JsonValue& v, Endpoints& e) {
  FieldReader r("Endpoints", e);
  const FieldPath root;
  const JsonValue* subsets = r.array(v, root, "subsets");
  if (!subsets) return std::move(r).status();
  const FieldPath subsets_at = root.child("subsets");
  e.subsets.reserve(subsets->Size());
  std::size_t i = 0;
  for (const auto& s : subsets->GetArray()) {
    const FieldPath subset_at = subsets_at.element(i++);
    if (!r.expect_object(s, subset_at)) break;
    EndpointSubset& subset = e.subsets.emplace_back();
    decode_addresses(r, s, subset_at, "addresses", subset.addresses);
    decode_addresses(r, s, subset_at, "notReadyAddresses", subset.not_ready_addresses);
    if (const JsonValue* ports = r.array(s, subset_at, "ports")) {
      const FieldPath ports_at = subset_at.child("ports");
      subset.ports.reserve(ports->Size());
      std::size_t j = 0;
      for (const auto& p : ports->GetArray()) {
        const FieldPath port_at = ports_at.element(j++);
        if (!r.expect_object(p, port_at)) break;
        EndpointPort& port = subset.ports.emplace_back();
        r.string(p, port_at, "name", port.name);
        r.int32(p, port_at, "port", port.port);
        r.string(p, port_at, "protocol", port.protocol);
        if (port.protocol.empty()) port.protocol = "TCP";
        r.string(p, port_at, "appProtocol", port.app_protocol);
      }
    }
    if (r.failed()) break;
  }
  return std::move(r).status();
}

void encode_addresses(detail::JsonWriter& w, const char* key,
                      const std::vector<EndpointAddress>& addresses) {
  if (addresses.empty()) return;
  w.Key(key);
  w.StartArray();
  for (const auto& a : addresses) {
    w.StartObject();
    detail::key_string(w, "ip", a.ip);
    detail::key_string(w, "hostname", a.hostname);
    detail::key_string(w, "nodeName", a.node_name);
    if (a.target_ref) {
      w.Key("targetRef");
      w.StartObject();
      detail::key_string(w, "kind", a.target_ref->kind);
      detail::key_string(w, "namespace", a.target_ref->namespace_);
      detail::key_string(w, "name", a.target_ref->name);
      detail::key_string(w, "uid", a.target_ref->uid.str());
      w.EndObject();
    }
    w.EndObject();
  }
  w.EndArray();
}

void encode(detail::JsonWriter& w, const Endpoints& e) {
  // An empty list is sent explicitly: "no endpoints" is a state, not an omission.
  w.Key("subsets");
  w.StartArray();
  for (const auto& s : e.subsets) {
    w.StartObject();
    encode_addresses(w, "addresses", s.addresses);
    encode_addresses(w, "notReadyAddresses", s.not_ready_addresses);
    if (!s.ports.empty()) {
      w.Key("ports");
      w.StartArray();
      for (const auto& p : s.ports) {
        w.StartObject();
        detail::key_string(w, "name", p.name);
        w.Key("port");
        w.Int(p.port);
        detail::key_string(w, "protocol", p.protocol);
        detail::key_string(w, "appProtocol", p.app_protocol);
        w.EndObject();
      }
      w.EndArray();
    }
    w.EndObject();
  }
  w.EndArray();
}

}  // namespace

const ResourceType& ResourceTraits<Endpoints>::type() {
  static const ResourceType t =
      detail::make_type<Endpoints>({"", "v1", "endpoints", "Endpoints", true}, decode, encode);
  return t;
}

}  // namespace kinformer::client
