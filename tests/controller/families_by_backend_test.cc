// FamiliesByBackend: the metric families a kind of controller object shares per registry backend.
#include "families_by_backend.h"

#include <memory>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include "kinformer/prometheus/prometheus_registry.h"

namespace kinformer::controller {
namespace {

struct ProbeFamilies {
  explicit ProbeFamilies(std::shared_ptr<informer::MetricsRegistry> r) : registry(std::move(r)) {}
  std::shared_ptr<informer::MetricsRegistry> registry;
  std::set<std::string> names;
};

// A wrapper of a Prometheus registry is not its backend: the families are found, and forgotten
// after their last user, under the backend's address, not the wrapper's.
TEST(FamiliesByBackend, TheLastReleaseForgetsTheFamiliesOfAWrappedBackend) {
  detail::FamiliesByBackend<ProbeFamilies> by_backend;
  auto shared = std::make_shared<prometheus::Registry>();
  auto first = std::make_shared<prom::PrometheusRegistry>(shared);
  auto second = std::make_shared<prom::PrometheusRegistry>(shared);
  ASSERT_NE(first->backend(), static_cast<const void*>(first.get()));
  std::lock_guard lock(by_backend.mu);
  auto a = by_backend.acquire(first, "a");
  auto b = by_backend.acquire(second, "b");
  ASSERT_TRUE(a);
  EXPECT_EQ(a, b);
  EXPECT_FALSE(by_backend.acquire(second, "a")) << "one name per backend";
  by_backend.release(b, "b");
  EXPECT_FALSE(b);
  EXPECT_EQ(by_backend.size(), 1u);
  by_backend.release(a, "a");
  EXPECT_EQ(by_backend.size(), 0u);
  auto again = by_backend.acquire(first, "a");
  ASSERT_TRUE(again) << "the name is free once released";
  EXPECT_EQ(again->names, std::set<std::string>{"a"});
}

}  // namespace
}  // namespace kinformer::controller
