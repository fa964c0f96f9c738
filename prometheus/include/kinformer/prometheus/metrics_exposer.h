#pragma once
// MetricsExposer: serves a prometheus-cpp registry (e.g. a PrometheusRegistry's) over HTTP for
// components that have no exposer of their own. Components that already expose Prometheus
// metrics pass a PrometheusRegistry on their registry to FactoryOptions::registry instead.

#include <cstdint>
#include <memory>
#include <string>

namespace prometheus {
class Exposer;
class Registry;
}  // namespace prometheus

namespace kinformer::prom {

/// Serves `registry` as Prometheus text on http://<bind_address>/metrics from a thread of its own
/// (prometheus-cpp's civetweb server). Lifetime: serving stops when the exposer is destroyed; it
/// keeps the registry alive until then. Thread-safety: immutable after construction.
class MetricsExposer {
 public:
  /// `bind_address`: "127.0.0.1:9464", or port 0 for any free port (see port()). Throws
  /// client::ConfigError naming the address when it cannot listen there.
  MetricsExposer(const std::string& bind_address, std::shared_ptr<prometheus::Registry> registry);
  ~MetricsExposer();
  MetricsExposer(const MetricsExposer&) = delete;
  MetricsExposer& operator=(const MetricsExposer&) = delete;

  /// The port it listens on.
  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::uint16_t port_ = 0;
};

}  // namespace kinformer::prom
