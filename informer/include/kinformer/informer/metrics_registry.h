#pragma once
// MetricsRegistry: where kinformer's components register their metrics (counters, gauges,
// histograms with labels), as small interfaces with no monitoring system behind them. The
// Prometheus implementation is a target of its own (kinformer::prometheus); the core has an
// in-memory registry (a factory's default) and a null one.

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kinformer::informer {

/// Label name -> value of one series. Values must be bounded (never an object name or a uid).
using MetricLabels = std::map<std::string, std::string>;

/// A monotonic counter. Thread-safe.
class Counter {
 public:
  virtual ~Counter() = default;
  /// Adds `by` (non-negative).
  virtual void increment(double by = 1) = 0;
  /// The current value (the null registry's: 0).
  [[nodiscard]] virtual double value() const = 0;
};

/// A value that goes up and down. Thread-safe.
class Gauge {
 public:
  virtual ~Gauge() = default;
  virtual void set(double value) = 0;
  virtual void increment(double by = 1) = 0;
  virtual void decrement(double by = 1) = 0;
  /// The current value (the null registry's: 0).
  [[nodiscard]] virtual double value() const = 0;
};

/// A histogram with the bucket bounds of its family. Thread-safe.
class Histogram {
 public:
  virtual ~Histogram() = default;
  virtual void observe(double value) = 0;
};

/// The series of one metric name, one per label set. Thread-safe.
template <typename Metric>
class MetricFamily {
 public:
  virtual ~MetricFamily() = default;
  /// The series with `labels`, created on first use; equal labels give the same series. The
  /// reference stays valid until remove() of it (or the registry is destroyed).
  virtual Metric& add(const MetricLabels& labels) = 0;
  /// Removes `metric` (from add()) from the family: it is no longer exported, and every reference
  /// to it (also one another add() with equal labels returned) is invalid.
  virtual void remove(Metric* metric) = 0;
};
using CounterFamily = MetricFamily<Counter>;
using GaugeFamily = MetricFamily<Gauge>;
using HistogramFamily = MetricFamily<Histogram>;

/// Registers metric families. A name registered again with the same type (and bounds, for a
/// histogram) gives the family already registered; another type or other bounds are refused
/// (std::invalid_argument). Names, help texts and bounds: each component's, informer/METRICS.md.
/// Thread-safe; families and series live as long as the registry, which components keep alive
/// (a shared_ptr) while they report to it.
class MetricsRegistry {
 public:
  virtual ~MetricsRegistry() = default;
  virtual CounterFamily& counter(const std::string& name, const std::string& help) = 0;
  virtual GaugeFamily& gauge(const std::string& name, const std::string& help) = 0;
  /// `buckets`: the upper bounds, ascending (a +Inf bucket is implied).
  virtual HistogramFamily& histogram(const std::string& name, const std::string& help,
                                     const std::vector<double>& buckets) = 0;
  /// What holds the series: registries with one backend share them (several wrappers of one
  /// monitoring system's registry), so names kept apart per registry are kept apart per backend.
  [[nodiscard]] virtual const void* backend() const noexcept { return this; }

  /// A registry that keeps nothing: every series is a shared no-op reading 0.
  static std::shared_ptr<MetricsRegistry> null();
  /// A registry that keeps every series in memory, readable through value() (an
  /// InformerFactory's default: a component without a monitoring system still reads its numbers).
  static std::shared_ptr<MetricsRegistry> in_memory();
};
using MetricsRegistryPtr = std::shared_ptr<MetricsRegistry>;

}  // namespace kinformer::informer
