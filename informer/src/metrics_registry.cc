#include "kinformer/informer/metrics_registry.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <typeinfo>
#include <unordered_map>
#include <vector>

namespace kinformer::informer {
namespace {

// --- null: one shared no-op series of each kind -----------------------------------------------

struct NullCounter final : Counter {
  void increment(double /*by*/) override {}
  [[nodiscard]] double value() const override { return 0; }
};
struct NullGauge final : Gauge {
  void set(double /*value*/) override {}
  void increment(double /*by*/) override {}
  void decrement(double /*by*/) override {}
  [[nodiscard]] double value() const override { return 0; }
};
struct NullHistogram final : Histogram {
  void observe(double /*value*/) override {}
};

template <typename Metric, typename Null>
struct NullFamily final : MetricFamily<Metric> {
  Metric& add(const MetricLabels& /*labels*/) override { return series; }
  void remove(Metric* /*metric*/) override {}
  Null series;
};

struct NullRegistry final : MetricsRegistry {
  CounterFamily& counter(const std::string& /*name*/, const std::string& /*help*/) override {
    return counters;
  }
  GaugeFamily& gauge(const std::string& /*name*/, const std::string& /*help*/) override {
    return gauges;
  }
  HistogramFamily& histogram(const std::string& /*name*/, const std::string& /*help*/,
                             const std::vector<double>& /*buckets*/) override {
    return histograms;
  }
  NullFamily<Counter, NullCounter> counters;
  NullFamily<Gauge, NullGauge> gauges;
  NullFamily<Histogram, NullHistogram> histograms;
};

// --- in memory ---------------------------------------------------------------------------------

struct MemoryCounter final : Counter {
  explicit MemoryCounter(const std::vector<double>& /*buckets*/) {}
  void increment(double by) override { v.fetch_add(by, std::memory_order_relaxed); }
  [[nodiscard]] double value() const override { return v.load(std::memory_order_relaxed); }
  std::atomic<double> v{0};
};
struct MemoryGauge final : Gauge {
  explicit MemoryGauge(const std::vector<double>& /*buckets*/) {}
  void set(double value) override { v.store(value, std::memory_order_relaxed); }
  void increment(double by) override { v.fetch_add(by, std::memory_order_relaxed); }
  void decrement(double by) override { v.fetch_sub(by, std::memory_order_relaxed); }
  [[nodiscard]] double value() const override { return v.load(std::memory_order_relaxed); }
  std::atomic<double> v{0};
};
struct MemoryHistogram final : Histogram {
  // `b`: the family's bounds, which outlive its series.
  explicit MemoryHistogram(const std::vector<double>& b) : bounds(b), counts(b.size() + 1) {}
  void observe(double value) override {
    const auto at = std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin();
    std::lock_guard lock(mu);
    ++counts[static_cast<std::size_t>(at)];
    sum += value;
  }
  const std::vector<double>& bounds;
  std::mutex mu;
  std::vector<std::uint64_t> counts;  // guarded by mu: per bucket, the last one +Inf
  double sum = 0;                     // guarded by mu
};

// The family's type-independent base, so the registry can hold every kind in one map.
struct AnyFamily {
  virtual ~AnyFamily() = default;
};

// A label set as one string, each name and value after its length: equal sets, equal keys, and
// no two sets alike. A series keyed by a std::map of its labels would hold a tree node per label
// (an informer's two dozen series, three or four labels each, came to 10 KiB); one string is
// one allocation.
std::string series_key(const MetricLabels& labels) {
  std::string key;
  for (const auto& [name, value] : labels) {
    key += std::to_string(name.size());
    key += ':';
    key += name;
    key += std::to_string(value.size());
    key += ':';
    key += value;
  }
  return key;
}

// The registry's label sets, each kept once and counted by the series that use it: half of an
// informer's series, in every family, carry the same set (its resource, namespace and selector).
class LabelSets {
 public:
  // The kept copy of `key`, used once more; equal keys, the same copy.
  const std::string* acquire(std::string key) {
    std::lock_guard lock(mu_);
    auto [it, added] = sets_.try_emplace(std::move(key), 0);
    ++it->second;
    return &it->first;
  }
  void release(const std::string* key) {
    std::lock_guard lock(mu_);
    auto it = sets_.find(*key);
    if (it != sets_.end() && --it->second == 0) sets_.erase(it);
  }

 private:
  std::mutex mu_;
  std::unordered_map<std::string, std::size_t> sets_;  // guarded by mu_: the series using each
};

template <typename Metric, typename Impl>
struct MemoryFamily final : MetricFamily<Metric>, AnyFamily {
  MemoryFamily(LabelSets& s, std::vector<double> b) : sets(s), buckets(std::move(b)) {}
  Metric& add(const MetricLabels& labels) override {
    const std::string* key = sets.acquire(series_key(labels));
    std::lock_guard lock(mu);
    if (auto it = series.find(key); it != series.end()) {
      sets.release(key);  // counted once per series
      return *it->second;
    }
    try {
      return *series.emplace(key, std::make_unique<Impl>(buckets)).first->second;
    } catch (...) {
      sets.release(key);
      throw;
    }
  }
  void remove(Metric* metric) override {
    std::lock_guard lock(mu);
    std::erase_if(series, [&](const auto& kv) {
      if (kv.second.get() != metric) return false;
      sets.release(kv.first);
      return true;
    });
  }
  LabelSets& sets;  // the registry's, which outlive its families
  const std::vector<double> buckets;
  std::mutex mu;
  // guarded by mu: by label set, one kept copy per set (so the pointers compare as the sets do)
  std::map<const std::string*, std::unique_ptr<Impl>> series;
};

struct MemoryRegistry final : MetricsRegistry {
  CounterFamily& counter(const std::string& name, const std::string& /*help*/) override {
    return family<Counter, MemoryCounter>(name, {});
  }
  GaugeFamily& gauge(const std::string& name, const std::string& /*help*/) override {
    return family<Gauge, MemoryGauge>(name, {});
  }
  HistogramFamily& histogram(const std::string& name, const std::string& /*help*/,
                             const std::vector<double>& buckets) override {
    return family<Histogram, MemoryHistogram>(name, buckets);
  }

  template <typename Metric, typename Impl>
  MetricFamily<Metric>& family(const std::string& name, const std::vector<double>& buckets) {
    std::lock_guard lock(mu);
    auto& slot = families[name];
    if (!slot) slot = std::make_unique<MemoryFamily<Metric, Impl>>(label_sets, buckets);
    auto* f = dynamic_cast<MemoryFamily<Metric, Impl>*>(slot.get());
    if (f == nullptr) {
      throw std::invalid_argument("metric " + name + " is already registered with another type");
    }
    if (f->buckets != buckets) {
      throw std::invalid_argument("metric " + name +
                                  " is already registered with other bucket bounds");
    }
    return *f;
  }

  LabelSets label_sets;  // declared before the families, so destroyed after them
  std::mutex mu;
  std::map<std::string, std::unique_ptr<AnyFamily>> families;  // guarded by mu
};

}  // namespace

std::shared_ptr<MetricsRegistry> MetricsRegistry::null() {
  static const auto registry = std::make_shared<NullRegistry>();
  return registry;
}

std::shared_ptr<MetricsRegistry> MetricsRegistry::in_memory() {
  return std::make_shared<MemoryRegistry>();
}

}  // namespace kinformer::informer
