#pragma once
// PrometheusRegistry: kinformer's MetricsRegistry on a prometheus-cpp registry, so that an
// application that already serves Prometheus exports kinformer's series with its own.

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kinformer/informer/metrics_registry.h"

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace kinformer::prom {

/// Registers every family in a prometheus::Registry under the name, help text and bucket bounds
/// it is given (informer/METRICS.md); series are prometheus-cpp's, so values and removal behave
/// as prometheus-cpp's do. A name registered twice gives the family already registered (unless
/// the prometheus registry was made with InsertBehavior::Throw: then it throws); a histogram
/// registered again with other bucket bounds is refused (std::invalid_argument).
/// Several PrometheusRegistry objects on one prometheus::Registry share their families and series
/// (and backend(): a name kept apart per registry is kept apart across them).
/// Thread-safe. Lifetime: keeps the prometheus registry alive; families and series live as long
/// as the last of the objects on it.
class PrometheusRegistry final : public informer::MetricsRegistry {
 public:
  /// `registry` null: a new one (see registry_ptr()).
  explicit PrometheusRegistry(std::shared_ptr<prometheus::Registry> registry = nullptr);
  ~PrometheusRegistry() override;
  PrometheusRegistry(const PrometheusRegistry&) = delete;
  PrometheusRegistry& operator=(const PrometheusRegistry&) = delete;

  informer::CounterFamily& counter(const std::string& name, const std::string& help) override;
  informer::GaugeFamily& gauge(const std::string& name, const std::string& help) override;
  informer::HistogramFamily& histogram(const std::string& name, const std::string& help,
                                       const std::vector<double>& buckets) override;
  /// The prometheus registry.
  [[nodiscard]] const void* backend() const noexcept override { return registry_.get(); }

  /// The prometheus-cpp registry (to collect, or to serve with MetricsExposer).
  [[nodiscard]] prometheus::Registry& registry() const noexcept { return *registry_; }
  [[nodiscard]] std::shared_ptr<prometheus::Registry> registry_ptr() const noexcept {
    return registry_;
  }

 private:
  struct AnyFamily {
    virtual ~AnyFamily() = default;
  };
  // One adapter per prometheus family (a name registered twice shares it), shared by every
  // PrometheusRegistry on the same prometheus registry.
  struct Adapters {
    std::mutex mu;
    std::vector<std::pair<const void*, std::unique_ptr<AnyFamily>>> families;  // guarded by mu
  };
  static std::shared_ptr<Adapters> adapters_of(const prometheus::Registry* registry);
  const std::shared_ptr<prometheus::Registry> registry_;
  const std::shared_ptr<Adapters> adapters_;
  template <typename Adapter, typename Family>
  Adapter& adapt(Family& family, const std::vector<double>& buckets);
};

}  // namespace kinformer::prom
