#pragma once
// IoRuntime: the threads that run RestClients' network I/O (connections, TLS, decoding of list
// and watch responses). A RestClient without one runs a runtime of one thread of its own; clients
// given the same runtime (RestClientOptions::runtime) share its threads, so threads grow with the
// runtime's size, not with clients (ClusterRegistry gives every remote cluster's client one).

#include <cstddef>
#include <memory>

namespace kinformer::client {

/// Lifetime: clients hold their runtime by shared_ptr; it stops when the last holder lets go.
/// Thread-safety: immutable after construction.
class IoRuntime {
 public:
  /// Starts `threads` threads (0 counts as 1).
  explicit IoRuntime(std::size_t threads = default_threads());
  /// Stops and joins the threads (every client on it is gone by then).
  ~IoRuntime();
  IoRuntime(const IoRuntime&) = delete;
  IoRuntime& operator=(const IoRuntime&) = delete;

  [[nodiscard]] std::size_t threads() const noexcept;
  /// True on one of this runtime's threads (a blocking client call there would wait for
  /// itself: clients refuse it).
  [[nodiscard]] bool running_in_this_thread() const noexcept;
  /// The cores, at most 4 (I/O and decoding of a whole control plane fit in that; more threads
  /// only add switching), at least 1.
  [[nodiscard]] static std::size_t default_threads() noexcept;

  struct Impl;  ///< Asio inside: client/src/io_runtime_impl.h
  [[nodiscard]] Impl& impl() noexcept { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

using IoRuntimePtr = std::shared_ptr<IoRuntime>;

}  // namespace kinformer::client
