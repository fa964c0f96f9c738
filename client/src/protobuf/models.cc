// The typed models from protobuf: the fields client/src/pod.cc, secret.cc, endpoints.cc and
// endpoint_slice.cc read from JSON, with the same defaults; everything else is skipped.
// Field numbers: k8s.io/api core/v1/generated.proto and discovery/v1/generated.proto (read at
// commit 10b39a39bcee995dfe7cd5e8e7b922be5e46f1e2). Every object has metadata = 1, decoded
// before these (codec.cc), so these skip field 1.
#include "protobuf/decoders.h"

namespace kinformer::client::detail::pb {
namespace {

// core/v1 ObjectReference {kind = 1, namespace = 2, name = 3, uid = 4, apiVersion = 5,
// resourceVersion = 6, fieldPath = 7}.
void decode_object_reference(Message& m, ObjectReference& ref) {
  while (m.next()) {
    switch (m.tag()) {
      case 1:
        m.string("kind", ref.kind);
        break;
      case 2:
        m.string("namespace", ref.namespace_);
        break;
      case 3:
        m.string("name", ref.name);
        break;
      case 4:
        m.string("uid", ref.uid);
        break;
      default:
        m.skip();
    }
  }
}

// --- Pod ---------------------------------------------------------------------------------

// ContainerPort {name = 1, hostPort = 2, containerPort = 3, protocol = 4, hostIP = 5}.
void decode_container_port(Message& m, ContainerPort& port) {
  while (m.next()) {
    switch (m.tag()) {
      case 1:
        m.string("name", port.name);
        break;
      case 3:
        m.int32("containerPort", port.container_port);
        break;
      case 4:
        m.string("protocol", port.protocol);
        break;
      default:
        m.skip();
    }
  }
  if (port.protocol.empty()) port.protocol = "TCP";
}

// Container {name = 1, image = 2, ..., ports = 6, ...}.
void decode_container(Message& m, Container& c) {
  while (m.next()) {
    switch (m.tag()) {
      case 1:
        m.string("name", c.name);
        break;
      case 2:
        m.string("image", c.image);
        break;
      case 6:
        repeated(m, "ports", c.ports, decode_container_port);
        break;
      default:
        m.skip();
    }
  }
}

// PodSpec {..., containers = 2, serviceAccountName = 8, nodeName = 10, hostNetwork = 11, ...}
// (initContainers = 20 and ephemeralContainers = 34 are not kept, as in JSON).
void decode_pod_spec(Message& m, Pod& pod) {
  while (m.next()) {
    switch (m.tag()) {
      case 2:
        repeated(m, "containers", pod.containers, decode_container);
        break;
      case 8:
        m.string("serviceAccountName", pod.service_account_name);
        break;
      case 10:
        m.string("nodeName", pod.node_name);
        break;
      case 11:
        m.boolean("hostNetwork", pod.host_network);
        break;
      default:
        m.skip();
    }
  }
}

// PodCondition {type = 1, status = 2, ...}.
void decode_pod_condition(Message& m, PodCondition& c) {
  while (m.next()) {
    switch (m.tag()) {
      case 1:
        m.string("type", c.type);
        break;
      case 2:
        m.string("status", c.status);
        break;
      default:
        m.skip();
    }
  }
}

// PodIP {ip = 1}.
void decode_pod_ip(Message& m, std::string& ip) {
  while (m.next()) {
    if (m.tag() == 1) {
      m.string("ip", ip);
    } else {
      m.skip();
    }
  }
}

// PodStatus {phase = 1, conditions = 2, hostIP = 5, podIP = 6, podIPs = 12, ...}.
void decode_pod_status(Message& m, Pod& pod) {
  while (m.next()) {
    switch (m.tag()) {
      case 1:
        m.string("phase", pod.phase);
        break;
      case 2:
        repeated(m, "conditions", pod.conditions, decode_pod_condition);
        break;
      case 5:
        m.string("hostIP", pod.host_ip);
        break;
      case 6:
        m.string("podIP", pod.pod_ip);
        break;
      case 12:
        repeated(m, "podIPs", pod.pod_ips, decode_pod_ip);
        break;
      default:
        m.skip();
    }
  }
}

// --- Endpoints ---------------------------------------------------------------------------

// EndpointAddress {ip = 1, targetRef = 2, hostname = 3, nodeName = 4}.
void decode_endpoint_address(Message& m, EndpointAddress& a) {
  while (m.next()) {
    switch (m.tag()) {
      case 1:
        m.string("ip", a.ip);
        break;
      case 2:
        nested(m, "targetRef",
               [&](Message& r) { decode_object_reference(r, a.target_ref.emplace()); });
        break;
      case 3:
        m.string("hostname", a.hostname);
        break;
      case 4:
        m.string("nodeName", a.node_name);
        break;
      default:
        m.skip();
    }
  }
}

// core/v1 EndpointPort {name = 1, port = 2, protocol = 3, appProtocol = 4}.
void decode_endpoint_port(Message& m, EndpointPort& p) {
  while (m.next()) {
    switch (m.tag()) {
      case 1:
        m.string("name", p.name);
        break;
      case 2:
        m.int32("port", p.port);
        break;
      case 3:
        m.string("protocol", p.protocol);
        break;
      case 4:
        m.string("appProtocol", p.app_protocol);
        break;
      default:
        m.skip();
    }
  }
  if (p.protocol.empty()) p.protocol = "TCP";
}

// EndpointSubset {addresses = 1, notReadyAddresses = 2, ports = 3}.
void decode_endpoint_subset(Message& m, EndpointSubset& s) {
  while (m.next()) {
    switch (m.tag()) {
      case 1:
        repeated(m, "addresses", s.addresses, decode_endpoint_address);
        break;
      case 2:
        repeated(m, "notReadyAddresses", s.not_ready_addresses, decode_endpoint_address);
        break;
      case 3:
        repeated(m, "ports", s.ports, decode_endpoint_port);
        break;
      default:
        m.skip();
    }
  }
}

// --- EndpointSlice -----------------------------------------------------------------------

// discovery/v1 EndpointConditions {ready = 1, serving = 2, terminating = 3}: proto2 optional,
// so presence is kept (unset = unknown, as absent/null in JSON).
void decode_endpoint_conditions(Message& m, SliceEndpoint& e) {
  while (m.next()) {
    bool v = false;
    switch (m.tag()) {
      case 1:
        if (m.boolean("ready", v)) e.ready = v;
        break;
      case 2:
        if (m.boolean("serving", v)) e.serving = v;
        break;
      case 3:
        if (m.boolean("terminating", v)) e.terminating = v;
        break;
      default:
        m.skip();
    }
  }
}

// discovery/v1 Endpoint {addresses = 1, conditions = 2, hostname = 3, targetRef = 4,
// deprecatedTopology = 5, nodeName = 6, zone = 7, hints = 8}.
void decode_slice_endpoint(Message& m, SliceEndpoint& e) {
  while (m.next()) {
    switch (m.tag()) {
      case 1: {
        std::string_view address;
        if (m.bytes("addresses", address, "a string")) e.addresses.push_back(address);
        break;
      }
      case 2:
        nested(m, "conditions", [&](Message& c) { decode_endpoint_conditions(c, e); });
        break;
      case 3:
        m.string("hostname", e.hostname);
        break;
      case 4:
        nested(m, "targetRef",
               [&](Message& r) { decode_object_reference(r, e.target_ref.emplace()); });
        break;
      case 6:
        m.string("nodeName", e.node_name);
        break;
      case 7:
        m.string("zone", e.zone);
        break;
      default:
        m.skip();
    }
  }
}

// discovery/v1 EndpointPort {name = 1, protocol = 2, port = 3, appProtocol = 4}; an unset port
// means all ports.
void decode_slice_port(Message& m, SlicePort& p) {
  while (m.next()) {
    switch (m.tag()) {
      case 1:
        m.string("name", p.name);
        break;
      case 2:
        m.string("protocol", p.protocol);
        break;
      case 3: {
        std::int32_t port = 0;
        if (m.int32("port", port)) p.port = port;
        break;
      }
      case 4:
        m.string("appProtocol", p.app_protocol);
        break;
      default:
        m.skip();
    }
  }
  if (p.protocol.empty()) p.protocol = "TCP";
}

}  // namespace

// Pod {metadata = 1, spec = 2, status = 3}.
void decode_pod(Message& m, Pod& pod) {
  while (m.next()) {
    switch (m.tag()) {
      case 2:
        nested(m, "spec", [&](Message& s) { decode_pod_spec(s, pod); });
        break;
      case 3:
        nested(m, "status", [&](Message& s) { decode_pod_status(s, pod); });
        break;
      default:
        m.skip();
    }
  }
}

// Secret {metadata = 1, data = 2 (map<string, bytes>: the bytes themselves, no base64),
// type = 3, stringData = 4 (write-only; not kept, as in JSON), immutable = 5}.
void decode_secret(Message& m, Secret& secret) {
  ByteEntries data;
  data.reserve(4);  // fewer reallocations that free copies of short (inline) values
  struct Wipe {     // the values decoded so far, when the message fails half-way
    ByteEntries& data;
    ~Wipe() { wipe_values(data); }
  } wipe{data};
  while (m.next()) {
    switch (m.tag()) {
      case 2:
        map_entry(m, "data", data);
        break;
      case 3:
        m.string("type", secret.type);
        break;
      default:
        m.skip();
    }
  }
  secret.data = ByteMap(std::move(data));  // sorted, the last of equal keys kept
}

// Endpoints {metadata = 1, subsets = 2}.
void decode_endpoints(Message& m, Endpoints& endpoints) {
  while (m.next()) {
    switch (m.tag()) {
      case 2:
        repeated(m, "subsets", endpoints.subsets, decode_endpoint_subset);
        break;
      default:
        m.skip();
    }
  }
}

// EndpointSlice {metadata = 1, endpoints = 2, ports = 3, addressType = 4}.
void decode_endpoint_slice(Message& m, EndpointSlice& slice) {
  while (m.next()) {
    switch (m.tag()) {
      case 2:
        repeated(m, "endpoints", slice.endpoints, decode_slice_endpoint);
        break;
      case 3:
        repeated(m, "ports", slice.ports, decode_slice_port);
        break;
      case 4:
        m.string("addressType", slice.address_type);
        break;
      default:
        m.skip();
    }
  }
  // Repeated fields grow by doubling: a slice of 50 endpoints would keep room for 64 (a sixth
  // of its memory) for as long as it is cached.
  slice.endpoints.shrink_to_fit();
}

}  // namespace kinformer::client::detail::pb
