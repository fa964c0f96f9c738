#include "kinformer/client/resource.h"

namespace kinformer::client {

std::string GroupVersionResource::api_version() const {
  return group.empty() ? version : group + "/" + version;
}

std::string GroupVersionResource::path(std::string_view ns, std::string_view name) const {
  std::string p = group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
  if (namespaced && !ns.empty()) p.append("/namespaces/").append(ns);
  p.append("/").append(resource);
  if (!name.empty()) p.append("/").append(name);
  return p;
}

std::string GroupVersionResource::to_string() const {
  return group.empty() ? resource : group + "/" + version + "/" + resource;
}

}  // namespace kinformer::client
