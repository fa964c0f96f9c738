#include "kinformer/prometheus/prometheus_registry.h"

#include <map>
#include <stdexcept>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

namespace kinformer::prom {
namespace {

struct CounterSeries final : informer::Counter {
  explicit CounterSeries(prometheus::Counter& m) : metric(m) {}
  void increment(double by) override { metric.Increment(by); }
  [[nodiscard]] double value() const override { return metric.Value(); }
  prometheus::Counter& metric;
};

struct GaugeSeries final : informer::Gauge {
  explicit GaugeSeries(prometheus::Gauge& m) : metric(m) {}
  void set(double value) override { metric.Set(value); }
  void increment(double by) override { metric.Increment(by); }
  void decrement(double by) override { metric.Decrement(by); }
  [[nodiscard]] double value() const override { return metric.Value(); }
  prometheus::Gauge& metric;
};

struct HistogramSeries final : informer::Histogram {
  explicit HistogramSeries(prometheus::Histogram& m) : metric(m) {}
  void observe(double value) override { metric.Observe(value); }
  prometheus::Histogram& metric;
};

// A prometheus family as a MetricFamily: one series adapter per prometheus series (equal labels
// give prometheus-cpp's same series, so the same adapter).
template <typename Metric, typename Prom, typename Series>
class FamilyAdapter final : public informer::MetricFamily<Metric> {
 public:
  FamilyAdapter(prometheus::Family<Prom>& family, std::vector<double> buckets)
      : family_(family), buckets_(std::move(buckets)) {}

  Metric& add(const informer::MetricLabels& labels) override {
    // Under mu_ from the prometheus series to its adapter: a remove() in between would leave an
    // adapter of a freed series.
    std::lock_guard lock(mu_);
    Prom* metric = nullptr;
    if constexpr (std::is_same_v<Prom, prometheus::Histogram>) {
      metric = &family_.Add(labels, prometheus::Histogram::BucketBoundaries(buckets_));
    } else {
      metric = &family_.Add(labels);
    }
    auto& slot = series_[metric];
    if (!slot) slot = std::make_unique<Series>(*metric);
    return *slot;
  }

  /// The bucket bounds of every series (empty unless a histogram).
  [[nodiscard]] const std::vector<double>& buckets() const { return buckets_; }

  void remove(Metric* metric) override {
    std::lock_guard lock(mu_);
    for (auto it = series_.begin(); it != series_.end(); ++it) {
      if (it->second.get() != metric) continue;
      family_.Remove(it->first);
      series_.erase(it);
      return;
    }
  }

 private:
  prometheus::Family<Prom>& family_;
  const std::vector<double> buckets_;
  std::mutex mu_;
  std::map<Prom*, std::unique_ptr<Series>> series_;  // guarded by mu_
};

using CounterAdapter = FamilyAdapter<informer::Counter, prometheus::Counter, CounterSeries>;
using GaugeAdapter = FamilyAdapter<informer::Gauge, prometheus::Gauge, GaugeSeries>;
using HistogramAdapter = FamilyAdapter<informer::Histogram, prometheus::Histogram, HistogramSeries>;

}  // namespace

// The adapters of each prometheus registry that has a PrometheusRegistry on it. Entries whose
// adapters are gone are dropped whenever adapters are made, so the map holds about as many
// entries as there are live registries.
std::shared_ptr<PrometheusRegistry::Adapters> PrometheusRegistry::adapters_of(
    const prometheus::Registry* registry) {
  static std::mutex mu;
  static std::map<const prometheus::Registry*, std::weak_ptr<Adapters>> all;
  std::lock_guard lock(mu);
  auto& weak = all[registry];
  auto adapters = weak.lock();
  if (!adapters) {
    adapters = std::make_shared<Adapters>();
    weak = adapters;
    std::erase_if(all, [](const auto& entry) { return entry.second.expired(); });
  }
  return adapters;
}

PrometheusRegistry::PrometheusRegistry(std::shared_ptr<prometheus::Registry> registry)
    : registry_(registry ? std::move(registry) : std::make_shared<prometheus::Registry>()),
      adapters_(adapters_of(registry_.get())) {}

PrometheusRegistry::~PrometheusRegistry() = default;

template <typename Adapter, typename Family>
Adapter& PrometheusRegistry::adapt(Family& family, const std::vector<double>& buckets) {
  struct Held final : AnyFamily {
    Held(Family& f, const std::vector<double>& b) : adapter(f, b) {}
    Adapter adapter;
  };
  std::lock_guard lock(adapters_->mu);
  auto& families = adapters_->families;
  for (auto& [key, held] : families) {
    if (key != &family) continue;
    Adapter& adapter = static_cast<Held&>(*held).adapter;
    if (adapter.buckets() != buckets) {
      // prometheus-cpp would keep the first bounds for every series: the second caller's
      // observations would land in buckets it did not ask for.
      throw std::invalid_argument("metric " + family.GetName() +
                                  " is already registered with other bucket bounds");
    }
    return adapter;
  }
  families.emplace_back(&family, std::make_unique<Held>(family, buckets));
  return static_cast<Held&>(*families.back().second).adapter;
}

informer::CounterFamily& PrometheusRegistry::counter(const std::string& name,
                                                     const std::string& help) {
  auto& family = prometheus::BuildCounter().Name(name).Help(help).Register(*registry_);
  return adapt<CounterAdapter>(family, {});
}

informer::GaugeFamily& PrometheusRegistry::gauge(const std::string& name, const std::string& help) {
  auto& family = prometheus::BuildGauge().Name(name).Help(help).Register(*registry_);
  return adapt<GaugeAdapter>(family, {});
}

informer::HistogramFamily& PrometheusRegistry::histogram(const std::string& name,
                                                         const std::string& help,
                                                         const std::vector<double>& buckets) {
  auto& family = prometheus::BuildHistogram().Name(name).Help(help).Register(*registry_);
  return adapt<HistogramAdapter>(family, buckets);
}

}  // namespace kinformer::prom
