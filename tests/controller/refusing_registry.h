// A MetricsRegistry over another (one backend with it) whose counter family of one name refuses
// new series while `refuse` is set, as a user's registry may throw from add().
#pragma once

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kinformer/informer/metrics_registry.h"

namespace kinformer::testing {

class RefusingRegistry final : public informer::MetricsRegistry {
 public:
  RefusingRegistry(std::shared_ptr<informer::MetricsRegistry> inner, std::string refused_counter)
      : inner_(std::move(inner)), refused_(std::move(refused_counter)) {}
  informer::CounterFamily& counter(const std::string& name, const std::string& help) override {
    auto& family = inner_->counter(name, help);
    if (name != refused_) return family;
    if (!refusing_) refusing_.emplace(family, refuse);
    return *refusing_;
  }
  informer::GaugeFamily& gauge(const std::string& name, const std::string& help) override {
    return inner_->gauge(name, help);
  }
  informer::HistogramFamily& histogram(const std::string& name, const std::string& help,
                                       const std::vector<double>& buckets) override {
    return inner_->histogram(name, help, buckets);
  }
  [[nodiscard]] const void* backend() const noexcept override { return inner_->backend(); }

  bool refuse = false;

 private:
  class Family final : public informer::CounterFamily {
   public:
    Family(informer::CounterFamily& inner, const bool& refuse) : inner_(inner), refuse_(refuse) {}
    informer::Counter& add(const informer::MetricLabels& labels) override {
      if (refuse_) throw std::runtime_error("this registry takes no new series");
      return inner_.add(labels);
    }
    void remove(informer::Counter* metric) override { inner_.remove(metric); }

   private:
    informer::CounterFamily& inner_;
    const bool& refuse_;
  };
  std::shared_ptr<informer::MetricsRegistry> inner_;
  std::string refused_;
  std::optional<Family> refusing_;
};

}  // namespace kinformer::testing
