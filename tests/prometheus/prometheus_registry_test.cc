// PrometheusRegistry: kinformer's series land in the prometheus-cpp registry under the names,
// help texts, labels and buckets given, and go when removed.

#include "kinformer/prometheus/prometheus_registry.h"

#include <stdexcept>

#include <gtest/gtest.h>

#include <prometheus/registry.h>

namespace kinformer::testing {
namespace {

const ::prometheus::MetricFamily* family_of(const std::vector<::prometheus::MetricFamily>& all,
                                            const std::string& name) {
  for (const auto& f : all) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

TEST(PrometheusRegistryTest, SeriesAreExportedAsGivenAndRemovedOnRequest) {
  prom::PrometheusRegistry registry;
  auto& counters = registry.counter("test_total", "Things counted");
  auto& a = counters.add({{"kind", "a"}});
  a.increment();
  a.increment(2);
  EXPECT_EQ(&counters.add({{"kind", "a"}}), &a);  // equal labels: the same series
  EXPECT_EQ(a.value(), 3);
  auto& gauge = registry.gauge("test_gauge", "A level").add({});
  gauge.set(5);
  gauge.decrement();
  auto& histogram = registry.histogram("test_seconds", "Durations", {0.1, 1}).add({{"x", "y"}});
  histogram.observe(0.5);

  auto all = registry.registry().Collect();
  const auto* c = family_of(all, "test_total");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->help, "Things counted");
  ASSERT_EQ(c->metric.size(), 1u);
  EXPECT_EQ(c->metric[0].counter.value, 3);
  ASSERT_EQ(c->metric[0].label.size(), 1u);
  EXPECT_EQ(c->metric[0].label[0].name, "kind");
  EXPECT_EQ(c->metric[0].label[0].value, "a");
  const auto* g = family_of(all, "test_gauge");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->metric.at(0).gauge.value, 4);
  const auto* h = family_of(all, "test_seconds");
  ASSERT_NE(h, nullptr);
  const auto& buckets = h->metric.at(0).histogram.bucket;
  ASSERT_EQ(buckets.size(), 3u);  // 0.1, 1, +Inf
  EXPECT_EQ(buckets[0].cumulative_count, 0u);
  EXPECT_EQ(buckets[1].cumulative_count, 1u);
  EXPECT_EQ(h->metric.at(0).histogram.sample_sum, 0.5);

  counters.remove(&a);
  all = registry.registry().Collect();
  c = family_of(all, "test_total");
  EXPECT_TRUE(c == nullptr || c->metric.empty());
  // A second registration of the name is the same family.
  EXPECT_EQ(&registry.counter("test_total", "Things counted"), &counters);
}

// prometheus-cpp keeps a family's first bucket bounds for every series: a second registration
// with others is refused, not served with buckets its caller did not ask for.
TEST(PrometheusRegistryTest, AHistogramRegisteredAgainWithOtherBucketsIsRefused) {
  prom::PrometheusRegistry registry;
  auto& first = registry.histogram("test_seconds", "help", {0.1, 1});
  EXPECT_EQ(&registry.histogram("test_seconds", "help", {0.1, 1}), &first);
  EXPECT_THROW(registry.histogram("test_seconds", "help", {0.5, 5}), std::invalid_argument);
}

TEST(PrometheusRegistryTest, WrapsTheApplicationsRegistry) {
  auto own = std::make_shared<::prometheus::Registry>();
  prom::PrometheusRegistry registry(own);
  EXPECT_EQ(registry.registry_ptr(), own);
  registry.counter("app_total", "help").add({}).increment();
  EXPECT_NE(family_of(own->Collect(), "app_total"), nullptr);
}

// Two wrappers of one prometheus registry share its families and series: one series, one owner.
TEST(PrometheusRegistryTest, TwoWrappersOfOneRegistryShareTheirSeries) {
  auto own = std::make_shared<::prometheus::Registry>();
  prom::PrometheusRegistry a(own);
  prom::PrometheusRegistry b(own);
  EXPECT_EQ(a.backend(), b.backend());
  auto& from_a = a.counter("shared_total", "help").add({{"k", "v"}});
  auto& from_b = b.counter("shared_total", "help").add({{"k", "v"}});
  EXPECT_EQ(&from_a, &from_b);
  from_b.increment();
  EXPECT_EQ(from_a.value(), 1);
  prom::PrometheusRegistry other;
  EXPECT_NE(other.backend(), a.backend());
}

}  // namespace
}  // namespace kinformer::testing
