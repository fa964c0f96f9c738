// MetricsRegistry: a registry of the application's own receives every informer series; the null
// registry takes them and keeps nothing; the in-memory one (the factory's default) keeps values.

#include "kinformer/informer/metrics_registry.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "test_env.h"

namespace kinformer::testing {
namespace {

using informer::MetricLabels;

// Records every registration and every change, as an application's own monitoring would.
class RecordingRegistry final : public informer::MetricsRegistry {
 public:
  struct Counter final : informer::Counter {
    void increment(double by) override {
      std::lock_guard lock(mu);
      v += by;
    }
    [[nodiscard]] double value() const override {
      std::lock_guard lock(mu);
      return v;
    }
    mutable std::mutex mu;
    double v = 0;
  };
  struct Gauge final : informer::Gauge {
    void set(double value) override {
      std::lock_guard lock(mu);
      v = value;
    }
    void increment(double by) override { set(value() + by); }
    void decrement(double by) override { set(value() - by); }
    [[nodiscard]] double value() const override {
      std::lock_guard lock(mu);
      return v;
    }
    mutable std::mutex mu;
    double v = 0;
  };
  struct Histogram final : informer::Histogram {
    void observe(double value) override {
      std::lock_guard lock(mu);
      seen.push_back(value);
    }
    std::mutex mu;
    std::vector<double> seen;
  };
  template <typename Metric, typename Impl>
  struct Family final : informer::MetricFamily<Metric> {
    Metric& add(const MetricLabels& labels) override {
      std::lock_guard lock(mu);
      auto& slot = series[labels];
      if (!slot) slot = std::make_unique<Impl>();
      return *slot;
    }
    void remove(Metric* metric) override {
      std::lock_guard lock(mu);
      std::erase_if(series, [&](const auto& kv) { return kv.second.get() == metric; });
      ++removed;
    }
    // The value of the one series whose labels include `subset` (-1: none).
    double value(const MetricLabels& subset) {
      std::lock_guard lock(mu);
      for (const auto& [labels, s] : series) {
        bool match = true;
        for (const auto& [k, v] : subset) match = match && labels.count(k) && labels.at(k) == v;
        if (match) return s->value();
      }
      return -1;
    }
    std::string help;
    std::vector<double> buckets;
    std::mutex mu;
    std::map<MetricLabels, std::unique_ptr<Impl>> series;  // guarded by mu
    int removed = 0;                                       // guarded by mu
  };

  informer::CounterFamily& counter(const std::string& name, const std::string& help) override {
    std::lock_guard lock(mu_);
    auto& f = counters[name];
    f.help = help;
    return f;
  }
  informer::GaugeFamily& gauge(const std::string& name, const std::string& help) override {
    std::lock_guard lock(mu_);
    auto& f = gauges[name];
    f.help = help;
    return f;
  }
  informer::HistogramFamily& histogram(const std::string& name, const std::string& help,
                                       const std::vector<double>& buckets) override {
    std::lock_guard lock(mu_);
    auto& f = histograms[name];
    f.help = help;
    f.buckets = buckets;
    return f;
  }

  std::map<std::string, Family<informer::Counter, Counter>> counters;
  std::map<std::string, Family<informer::Gauge, Gauge>> gauges;
  std::map<std::string, Family<informer::Histogram, Histogram>> histograms;

 private:
  std::mutex mu_;
};

TEST(MetricsRegistryTest, AnApplicationsOwnRegistryReceivesTheInformerSeries) {
  auto recording = std::make_shared<RecordingRegistry>();
  Env env({.registry = recording});
  env.fake->set_default_list({}, "10");
  auto& inf = env.factory->informer(test_type("secrets"));
  ASSERT_EQ(recording->counters.count("kinformer_watch_starts_total"), 1u);
  auto& starts = recording->counters["kinformer_watch_starts_total"];
  EXPECT_EQ(starts.help, "Watches opened");
  EXPECT_EQ(starts.value({{"resource", "secrets"}}), 0);
  // The bucket bounds of informer/METRICS.md.
  EXPECT_EQ(recording->histograms["kinformer_list_duration_seconds"].buckets,
            (std::vector<double>{0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60}));
  EXPECT_EQ(recording->histograms["kinformer_handler_delivery_lag_seconds"].buckets,
            (std::vector<double>{0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5}));

  env.factory->start();
  ASSERT_TRUE(inf.wait_for_sync(kDeadline));
  ASSERT_TRUE(eventually([&] { return starts.value({{"resource", "secrets"}}) == 1; }));
  auto& lists = recording->counters["kinformer_lists_total"];
  EXPECT_TRUE(eventually([&] { return lists.value({{"kind", "initial"}}) == 1; }));
  EXPECT_EQ(inf.metrics().watch_starts.value(), 1);  // the same series, read through the informer

  // A handler's series come with its registration and go with it.
  auto& exceptions = recording->counters["kinformer_handler_exceptions_total"];
  {
    auto r = inf.add_handler(std::make_shared<informer::ResourceEventHandlerFuncs>(),
                             {.name = "recorded"});
    EXPECT_EQ(exceptions.value({{"handler", "recorded"}}), 0);
    EXPECT_EQ(recording->gauges["kinformer_registered_handlers"].value({}), 1);
  }
  EXPECT_EQ(exceptions.value({{"handler", "recorded"}}), -1);
  EXPECT_EQ(exceptions.removed, 1);
}

TEST(MetricsRegistryTest, TheNullRegistryTakesEverySeriesAndKeepsNothing) {
  Env env({.registry = informer::MetricsRegistry::null()});
  env.fake->set_default_list({}, "10");
  auto& inf = env.factory->informer(test_type("secrets"));
  auto r = inf.add_handler(std::make_shared<informer::ResourceEventHandlerFuncs>());
  env.factory->start();
  ASSERT_TRUE(inf.wait_for_sync(kDeadline));
  ASSERT_TRUE(r.wait_for_sync(kDeadline));
  EXPECT_EQ(inf.metrics().watch_starts.value(), 0);
  EXPECT_EQ(inf.metrics().handlers.value(), 0);
  auto& family = informer::MetricsRegistry::null()->counter("anything", "");
  family.add({{"a", "b"}}).increment();
  family.remove(&family.add({}));  // a no-op, as is every call
  EXPECT_EQ(family.add({}).value(), 0);
}

TEST(MetricsRegistryTest, TheDefaultRegistryKeepsValuesInMemory) {
  Env env;
  env.fake->set_default_list({}, "10");
  auto& inf = env.factory->informer(test_type("secrets"));
  env.factory->start();
  ASSERT_TRUE(inf.wait_for_sync(kDeadline));
  ASSERT_TRUE(eventually([&] { return inf.metrics().watch_starts.value() == 1; }));
  // Equal labels, same series; remove() forgets it; another type under the name is refused.
  auto& registry = env.factory->registry();
  auto& family = registry.gauge("test_gauge", "help");
  family.add({{"k", "v"}}).set(3);
  EXPECT_EQ(&family.add({{"k", "v"}}), &family.add({{"k", "v"}}));
  EXPECT_EQ(family.add({{"k", "v"}}).value(), 3);
  family.remove(&family.add({{"k", "v"}}));
  EXPECT_EQ(family.add({{"k", "v"}}).value(), 0);
  EXPECT_EQ(&registry.gauge("test_gauge", "help"), &family);
  EXPECT_THROW(registry.counter("test_gauge", "help"), std::invalid_argument);
}

TEST(MetricsRegistryTest, FamiliesWithOneLabelSetKeepSeriesOfTheirOwn) {
  // The registry keeps each label set once for all its families' series.
  auto registry = informer::MetricsRegistry::in_memory();
  auto& a = registry->gauge("test_a", "help");
  auto& b = registry->gauge("test_b", "help");
  const informer::MetricLabels labels{{"resource", "pods"}, {"namespace", "ns"}};
  a.add(labels).set(1);
  b.add(labels).set(2);
  EXPECT_EQ(a.add(labels).value(), 1);
  EXPECT_EQ(b.add(labels).value(), 2);
  // One family's series removed, the other's stays with its label set (which a set added
  // meanwhile does not replace); added again, the removed one starts anew.
  a.remove(&a.add(labels));
  a.add({{"other", "x"}}).set(9);
  EXPECT_EQ(b.add(labels).value(), 2);
  EXPECT_EQ(a.add(labels).value(), 0);
  EXPECT_EQ(a.add({{"other", "x"}}).value(), 9);
  a.add(labels).set(4);
  b.remove(&b.add(labels));
  EXPECT_EQ(a.add(labels).value(), 4);
  a.remove(&a.add(labels));
  EXPECT_EQ(a.add(labels).value(), 0);
  // Label sets that only look alike are apart.
  EXPECT_NE(&a.add({{"k", "v1"}}), &a.add({{"k1", "v"}}));
  EXPECT_NE(&a.add({{"k", ""}}), &a.add({}));
}

TEST(MetricsRegistryTest, AHistogramRegisteredAgainWithOtherBucketsIsRefused) {
  auto registry = informer::MetricsRegistry::in_memory();
  auto& first = registry->histogram("test_seconds", "help", {0.1, 1});
  EXPECT_EQ(&registry->histogram("test_seconds", "help", {0.1, 1}), &first);
  EXPECT_THROW(registry->histogram("test_seconds", "help", {0.5, 5}), std::invalid_argument);
}

}  // namespace
}  // namespace kinformer::testing
