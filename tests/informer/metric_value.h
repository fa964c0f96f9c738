#pragma once
// Reads metrics back from a prometheus registry, for the informer tests.

#include <map>
#include <string>

#include <prometheus/registry.h>

namespace kinformer::testing {

// Reads a metric value back from the registry by family name and label subset.
inline double metric(prometheus::Registry& r, const std::string& family,
                     const std::map<std::string, std::string>& labels) {
  for (const auto& fam : r.Collect()) {
    if (fam.name != family) continue;
    for (const auto& m : fam.metric) {
      bool ok = true;
      for (const auto& [k, v] : labels) {
        bool found = false;
        for (const auto& lp : m.label) found = found || (lp.name == k && lp.value == v);
        ok = ok && found;
      }
      if (!ok) continue;
      switch (fam.type) {
        case prometheus::MetricType::Counter:
          return m.counter.value;
        case prometheus::MetricType::Gauge:
          return m.gauge.value;
        case prometheus::MetricType::Histogram:
          return static_cast<double>(m.histogram.sample_count);
        default:
          return -1;
      }
    }
  }
  return -1;
}

}  // namespace kinformer::testing
