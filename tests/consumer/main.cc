// Built against the installed kinformer package; exits non-zero if the linked library misbehaves.
#include <cstdio>

#include "kinformer/client/error.h"
#include "kinformer/client/resource.h"

int main() {
  kinformer::client::GroupVersionResource slices{"discovery.k8s.io", "v1", "endpointslices",
                                                  "EndpointSlice", true};
  const auto path = slices.path("default");
  if (path != "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices") {
    std::fprintf(stderr, "unexpected path %s\n", path.c_str());
    return 1;
  }
  std::printf("consumer ok: %s\n", path.c_str());
  return 0;
}
