#pragma once
// Wall-clock time as Prometheus timestamps want it.
#include <chrono>

namespace kinformer::informer::detail {

/// Seconds since the Unix epoch, now.
inline double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace kinformer::informer::detail
