#include "kinformer/client/endpoint_slice.h"

#include "detail/typed_codec.h"

namespace kinformer::client {
namespace {

std::optional<bool> opt_bool(const JsonValue& v, const char* name) {
  const JsonValue* m = detail::member(v, name);
  if (!m || !m->IsBool()) return std::nullopt;
  return m->GetBool();
}

Status decode(const JsonValue& v, EndpointSlice& s) {
  s.address_type = detail::get_string(v, "addressType");
  detail::for_each(v, "endpoints", [&](const JsonValue& e) {
    SliceEndpoint ep;
    detail::for_each(e, "addresses", [&](const JsonValue& a) {
      if (a.IsString()) ep.addresses.emplace_back(detail::view(a));
    });
    if (const JsonValue* c = detail::member(e, "conditions")) {
      ep.ready = opt_bool(*c, "ready");
      ep.serving = opt_bool(*c, "serving");
      ep.terminating = opt_bool(*c, "terminating");
    }
    ep.hostname = detail::get_string(e, "hostname");
    ep.node_name = detail::get_string(e, "nodeName");
    ep.zone = detail::get_string(e, "zone");
    if (const JsonValue* t = detail::member(e, "targetRef"); t && t->IsObject()) {
      ep.target_ref = ObjectReference{std::string(detail::get_string(*t, "kind")),
                                      std::string(detail::get_string(*t, "namespace")),
                                      std::string(detail::get_string(*t, "name")),
                                      std::string(detail::get_string(*t, "uid"))};
    }
    s.endpoints.push_back(std::move(ep));
  });
  detail::for_each(v, "ports", [&](const JsonValue& p) {
    SlicePort port;
    port.name = detail::get_string(p, "name");
    if (const JsonValue* n = detail::member(p, "port"); n && n->IsInt()) port.port = n->GetInt();
    port.protocol = detail::get_string(p, "protocol");
    if (port.protocol.empty()) port.protocol = "TCP";
    port.app_protocol = detail::get_string(p, "appProtocol");
    s.ports.push_back(std::move(port));
  });
  return Ok{};
}

void encode(detail::JsonWriter& w, const EndpointSlice& s) {
  detail::key_string(w, "addressType", s.address_type);
  w.Key("endpoints");
  w.StartArray();
  for (const auto& e : s.endpoints) {
    w.StartObject();
    w.Key("addresses");
    w.StartArray();
    for (const auto& a : e.addresses) detail::write_string(w, a);
    w.EndArray();
    if (e.ready || e.serving || e.terminating) {
      w.Key("conditions");
      w.StartObject();
      if (e.ready) (w.Key("ready"), w.Bool(*e.ready));
      if (e.serving) (w.Key("serving"), w.Bool(*e.serving));
      if (e.terminating) (w.Key("terminating"), w.Bool(*e.terminating));
      w.EndObject();
    }
    detail::key_string(w, "hostname", e.hostname);
    detail::key_string(w, "nodeName", e.node_name);
    detail::key_string(w, "zone", e.zone);
    if (e.target_ref) {
      w.Key("targetRef");
      w.StartObject();
      detail::key_string(w, "kind", e.target_ref->kind);
      detail::key_string(w, "namespace", e.target_ref->namespace_);
      detail::key_string(w, "name", e.target_ref->name);
      detail::key_string(w, "uid", e.target_ref->uid);
      w.EndObject();
    }
    w.EndObject();
  }
  w.EndArray();
  w.Key("ports");
  w.StartArray();
  for (const auto& p : s.ports) {
    w.StartObject();
    detail::key_string(w, "name", p.name);
    if (p.port) (w.Key("port"), w.Int(*p.port));
    detail::key_string(w, "protocol", p.protocol);
    detail::key_string(w, "appProtocol", p.app_protocol);
    w.EndObject();
  }
  w.EndArray();
}

}  // namespace

std::string EndpointSlice::service_name() const {
  const std::string* v = find_value(metadata.labels, "kubernetes.io/service-name");
  return v ? *v : std::string();
}

const ResourceType& ResourceTraits<EndpointSlice>::type() {
  static const ResourceType t =
      detail::make_type<EndpointSlice>({"discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", true}, decode, encode);
  return t;
}

}  // namespace kinformer::client
