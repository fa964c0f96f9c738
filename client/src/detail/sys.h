#pragma once
// Thread-safe wrappers for the two C library calls the client needs from the environment.
#include <cstdlib>
#include <string>
#include <system_error>

namespace kinformer::client::detail {

// The text of an errno value. std::strerror may share a static buffer between threads; the
// generic category's message() does not.
inline std::string errno_text(int err) { return std::generic_category().message(err); }

// An environment variable, or null. The library never calls setenv(), so reading is safe; the
// embedding program must not change the environment while it loads configuration.
inline const char* env(const char* name) {
  return std::getenv(name);  // NOLINT(concurrency-mt-unsafe): see above
}

}  // namespace kinformer::client::detail
