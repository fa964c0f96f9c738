#include "kinformer/client/endpoint_slice.h"

#include <cstring>
#include <ostream>

#include "detail/fields.h"
#include "detail/typed_codec.h"

namespace kinformer::client {

void AddressList::iterator::read() noexcept {
  // A varint length, then the address; a malformed tail (never built by push_back) ends the walk.
  std::size_t len = 0;
  std::size_t at = at_;
  for (int shift = 0; at < packed_.size() && shift < 64; shift += 7) {
    const auto byte = static_cast<unsigned char>(packed_[at++]);
    len |= static_cast<std::size_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) {
      if (len <= packed_.size() - at) {
        current_ = packed_.substr(at, len);
        next_ = at + len;
        return;
      }
      break;
    }
  }
  at_ = next_ = packed_.size();
  current_ = {};
}

AddressList::AddressList(std::initializer_list<std::string_view> addresses) {
  for (auto a : addresses) push_back(a);
}

AddressList::AddressList(AddressList&& other) noexcept {
  std::memcpy(buf_, other.buf_, sizeof buf_);
  std::memset(other.buf_, 0, sizeof other.buf_);
}

AddressList& AddressList::operator=(const AddressList& other) {
  if (this != &other) *this = AddressList(other);
  return *this;
}

AddressList& AddressList::operator=(AddressList&& other) noexcept {
  if (this != &other) {
    clear();
    std::memcpy(buf_, other.buf_, sizeof buf_);
    std::memset(other.buf_, 0, sizeof other.buf_);
  }
  return *this;
}

void AddressList::clear() noexcept {
  if (buf_[kInline] == kOnHeap) {
    char* block = nullptr;
    std::memcpy(&block, buf_, sizeof block);
    delete[] block;
  }
  std::memset(buf_, 0, sizeof buf_);
}

std::string_view AddressList::packed() const noexcept {
  if (buf_[kInline] != kOnHeap) {
    return {reinterpret_cast<const char*>(buf_), buf_[kInline]};
  }
  const char* block = nullptr;
  std::size_t size = 0;
  std::memcpy(&block, buf_, sizeof block);
  std::memcpy(&size, buf_ + sizeof block, sizeof size);
  return {block, size};
}

void AddressList::assign(std::string_view packed) {
  if (packed.size() <= kInline) {
    clear();
    std::memcpy(buf_, packed.data(), packed.size());
    buf_[kInline] = static_cast<unsigned char>(packed.size());
    return;
  }
  char* block = new char[packed.size()];  // before clear(): a failed allocation changes nothing
  std::memcpy(block, packed.data(), packed.size());
  clear();
  const std::size_t size = packed.size();
  std::memcpy(buf_, &block, sizeof block);
  std::memcpy(buf_ + sizeof block, &size, sizeof size);
  buf_[kInline] = kOnHeap;
}

void AddressList::push_back(std::string_view address) {
  std::string next(packed());
  std::size_t len = address.size();
  do {
    const auto low = static_cast<char>(len & 0x7f);
    len >>= 7;
    next.push_back(static_cast<char>(len ? (low | 0x80) : low));
  } while (len);
  next.append(address);
  assign(next);
}

std::size_t AddressList::size() const noexcept {
  std::size_t n = 0;
  for (auto it = begin(); it != end(); ++it) ++n;
  return n;
}

std::string_view AddressList::operator[](std::size_t i) const noexcept {
  auto it = begin();
  while (i-- > 0) ++it;
  return *it;
}

std::vector<std::string> AddressList::to_vector() const {
  std::vector<std::string> out;
  for (auto a : *this) out.emplace_back(a);
  return out;
}

std::ostream& operator<<(std::ostream& os, const AddressList& addresses) {
  os << '[';
  bool first = true;
  for (auto a : addresses) {
    os << (first ? "" : ", ") << a;
    first = false;
  }
  return os << ']';
}

namespace {

using detail::FieldPath;
using detail::FieldReader;

// An optional boolean member: absent/null leaves `out` unset ("unknown"); a wrong type is recorded.
void optional_boolean(FieldReader& r, const JsonValue& v, const FieldPath& at, const char* name,
                      std::optional<bool>& out) {
  const JsonValue* m = detail::member(v, name);
  if (!m || m->IsNull()) return;
  bool value = false;
  r.boolean(v, at, name, value);
  if (m->IsBool()) out = value;
}

void decode_endpoint(FieldReader& r, const JsonValue& e, const FieldPath& at, SliceEndpoint& ep) {
  if (const JsonValue* addresses = r.array(e, at, "addresses")) {
    const FieldPath addresses_at = at.child("addresses");
    std::size_t i = 0;
    for (const auto& a : addresses->GetArray()) {
      if (!r.expect_string(a, addresses_at.element(i++))) break;
      ep.addresses.push_back(detail::view(a));
    }
  }
  if (const JsonValue* c = r.object(e, at, "conditions")) {
    const FieldPath conditions_at = at.child("conditions");
    optional_boolean(r, *c, conditions_at, "ready", ep.ready);
    optional_boolean(r, *c, conditions_at, "serving", ep.serving);
    optional_boolean(r, *c, conditions_at, "terminating", ep.terminating);
  }
  r.string(e, at, "hostname", ep.hostname);
  r.string(e, at, "nodeName", ep.node_name);
  r.string(e, at, "zone", ep.zone);
  if (const JsonValue* t = r.object(e, at, "targetRef")) {
    const FieldPath ref_at = at.child("targetRef");
    ObjectReference& ref = ep.target_ref.emplace();
    r.string(*t, ref_at, "kind", ref.kind);
    r.string(*t, ref_at, "namespace", ref.namespace_);
    r.string(*t, ref_at, "name", ref.name);
    r.string(*t, ref_at, "uid", ref.uid);
  }
}

Status decode(const JsonValue& v, EndpointSlice& s) {
  FieldReader r("EndpointSlice", s);
  const FieldPath root;
  r.string(v, root, "addressType", s.address_type);
  if (const JsonValue* endpoints = r.array(v, root, "endpoints")) {
    const FieldPath endpoints_at = root.child("endpoints");
    s.endpoints.reserve(endpoints->Size());
    std::size_t i = 0;
    for (const auto& e : endpoints->GetArray()) {
      const FieldPath endpoint_at = endpoints_at.element(i++);
      if (!r.expect_object(e, endpoint_at)) break;
      decode_endpoint(r, e, endpoint_at, s.endpoints.emplace_back());
      if (r.failed()) break;
    }
  }
  if (const JsonValue* ports = r.array(v, root, "ports")) {
    const FieldPath ports_at = root.child("ports");
    s.ports.reserve(ports->Size());
    std::size_t i = 0;
    for (const auto& p : ports->GetArray()) {
      const FieldPath port_at = ports_at.element(i++);
      if (!r.expect_object(p, port_at)) break;
      SlicePort& port = s.ports.emplace_back();
      r.string(p, port_at, "name", port.name);
      // Unset (absent/null) means all ports.
      if (const JsonValue* n = detail::member(p, "port"); n && !n->IsNull()) {
        std::int32_t number = 0;
        r.int32(p, port_at, "port", number);
        if (n->IsInt()) port.port = number;
      }
      r.string(p, port_at, "protocol", port.protocol);
      if (port.protocol.empty()) port.protocol = "TCP";
      r.string(p, port_at, "appProtocol", port.app_protocol);
    }
  }
  return std::move(r).status();
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
      detail::key_string(w, "uid", e.target_ref->uid.str());
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
  static const ResourceType t = detail::make_type<EndpointSlice>(
      {"discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", true}, decode, encode);
  return t;
}

}  // namespace kinformer::client
