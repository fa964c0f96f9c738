#include "kinformer/prometheus/metrics_exposer.h"

#include <exception>

#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include "kinformer/client/error.h"

namespace kinformer::prom {

MetricsExposer::MetricsExposer(const std::string& bind_address,
                               std::shared_ptr<prometheus::Registry> registry)
    : registry_(std::move(registry)) {
  if (!registry_) throw client::ConfigError("metrics exposer: no registry given");
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(bind_address, /*num_threads=*/1);
  } catch (const std::exception& e) {
    throw client::ConfigError("metrics exposer: cannot listen on " + bind_address + ": " +
                              e.what());
  }
  exposer_->RegisterCollectable(registry_, "/metrics");
  const auto ports = exposer_->GetListeningPorts();
  if (!ports.empty()) port_ = static_cast<std::uint16_t>(ports.front());
}

MetricsExposer::~MetricsExposer() = default;

}  // namespace kinformer::prom
