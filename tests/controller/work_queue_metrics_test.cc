// WorkQueue's metrics: client-go's workqueue_* names, labelled name=<queue>, moving with each
// call; durations on the injected clock, so their values are exact. Also what a leader elector's
// series share with them: a series the registry refuses leaves nothing behind.
#include <map>
#include <optional>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include "fakes.h"
#include "kinformer/client/error.h"
#include "kinformer/controller/work_queue.h"
#include "kinformer/prometheus/prometheus_registry.h"
#include "leader_election_metrics.h"
#include "refusing_registry.h"

namespace kinformer::controller {
namespace {

using std::chrono::seconds;

// The series of `family` labelled name=`queue`; null when there is none.
std::optional<prometheus::ClientMetric> series(prometheus::Registry& registry,
                                               const std::string& family,
                                               const std::string& queue) {
  for (const auto& f : registry.Collect()) {
    if (f.name != family) continue;
    for (const auto& m : f.metric) {
      for (const auto& l : m.label) {
        if (l.name == "name" && l.value == queue) return m;
      }
    }
  }
  return std::nullopt;
}

double value(prometheus::Registry& r, const std::string& family, const std::string& queue = "q") {
  auto m = series(r, family, queue);
  if (!m) return -1;
  return family == "workqueue_depth" || family.ends_with("_seconds") ? m->gauge.value
                                                                     : m->counter.value;
}

struct Observed {
  std::uint64_t count;
  double sum;
  bool operator==(const Observed&) const = default;
};
std::ostream& operator<<(std::ostream& os, const Observed& o) {
  return os << "{count " << o.count << ", sum " << o.sum << "}";
}
Observed histogram(prometheus::Registry& r, const std::string& family,
                   const std::string& queue = "q") {
  auto m = series(r, family, queue);
  if (!m) return {0, -1};
  return {m->histogram.sample_count, m->histogram.sample_sum};
}

struct WorkQueueMetricsTest : ::testing::Test {
  std::shared_ptr<prom::PrometheusRegistry> metrics = std::make_shared<prom::PrometheusRegistry>();
  std::shared_ptr<prometheus::Registry> registry = metrics->registry_ptr();
  std::shared_ptr<testing::ManualClock> clock =
      std::make_shared<testing::ManualClock>(Clock::Duration::zero());
  std::optional<WorkQueue> queue{
      std::in_place, WorkQueueOptions{.name = "q", .clock = clock, .registry = metrics}};
};

TEST_F(WorkQueueMetricsTest, EveryClientGoMetricIsThereLabelledWithTheQueueName) {
  for (const char* family :
       {"workqueue_depth", "workqueue_adds_total", "workqueue_queue_duration_seconds",
        "workqueue_work_duration_seconds", "workqueue_unfinished_work_seconds",
        "workqueue_longest_running_processor_seconds", "workqueue_retries_total"}) {
    EXPECT_TRUE(series(*registry, family, "q")) << family;
  }
}

TEST_F(WorkQueueMetricsTest, DepthAddsAndDurationsMoveWithTheQueue) {
  queue->add("a");
  queue->add("b");
  queue->add("a");  // deduped: neither an add nor depth
  EXPECT_EQ(value(*registry, "workqueue_adds_total"), 2);
  EXPECT_EQ(value(*registry, "workqueue_depth"), 2);

  clock->advance(seconds(2));
  EXPECT_EQ(queue->get(), "a");  // queued 2 s
  EXPECT_EQ(value(*registry, "workqueue_depth"), 1);
  EXPECT_EQ(histogram(*registry, "workqueue_queue_duration_seconds"), (Observed{1, 2.0}));

  clock->advance(seconds(3));
  queue->update_metrics();  // a has run 3 s
  EXPECT_EQ(value(*registry, "workqueue_unfinished_work_seconds"), 3);
  EXPECT_EQ(value(*registry, "workqueue_longest_running_processor_seconds"), 3);

  EXPECT_EQ(queue->get(), "b");  // queued 5 s
  EXPECT_EQ(value(*registry, "workqueue_depth"), 0);
  EXPECT_EQ(histogram(*registry, "workqueue_queue_duration_seconds"), (Observed{2, 7.0}));
  clock->advance(seconds(1));
  queue->update_metrics();  // a 4 s, b 1 s
  EXPECT_EQ(value(*registry, "workqueue_unfinished_work_seconds"), 5);
  EXPECT_EQ(value(*registry, "workqueue_longest_running_processor_seconds"), 4);

  queue->add("a");  // while processed: an add, counted in depth, not ready
  EXPECT_EQ(value(*registry, "workqueue_adds_total"), 3);
  EXPECT_EQ(value(*registry, "workqueue_depth"), 1);
  queue->done("a");  // worked 4 s
  EXPECT_EQ(histogram(*registry, "workqueue_work_duration_seconds"), (Observed{1, 4.0}));
  EXPECT_EQ(value(*registry, "workqueue_unfinished_work_seconds"), 1);  // set by done() too
  EXPECT_EQ(value(*registry, "workqueue_longest_running_processor_seconds"), 1);
  clock->advance(seconds(1));
  queue->done("b");  // worked 2 s
  EXPECT_EQ(histogram(*registry, "workqueue_work_duration_seconds"), (Observed{2, 6.0}));
  EXPECT_EQ(value(*registry, "workqueue_unfinished_work_seconds"), 0);
  EXPECT_EQ(value(*registry, "workqueue_longest_running_processor_seconds"), 0);
  EXPECT_EQ(value(*registry, "workqueue_depth"), 1);  // a, again
  EXPECT_EQ(value(*registry, "workqueue_retries_total"), 0);
}

TEST_F(WorkQueueMetricsTest, EveryDelayedOrRateLimitedAddIsARetry) {
  queue->add_after("a", seconds(1));
  queue->add_rate_limited("b");
  queue->add_after("c", Clock::Duration::zero());
  EXPECT_EQ(value(*registry, "workqueue_retries_total"), 3);
  EXPECT_EQ(value(*registry, "workqueue_adds_total"), 1);  // c; the others wait
  clock->advance(seconds(1));
  queue->update_metrics();  // moves the due keys
  EXPECT_EQ(value(*registry, "workqueue_adds_total"), 3);
  EXPECT_EQ(value(*registry, "workqueue_depth"), 3);
  queue->shut_down();
  EXPECT_EQ(value(*registry, "workqueue_depth"), 0);  // dropped
}

TEST_F(WorkQueueMetricsTest, TwoQueuesOfOneNameOnOneRegistryAreRefusedAndTheNameIsFreeAgainAfter) {
  try {
    WorkQueue twin({.name = "q", .clock = clock, .registry = metrics});
    FAIL() << "a second queue named q was accepted";
  } catch (const client::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("\"q\""), std::string::npos) << e.what();
  }
  queue->add("a");  // the first queue's series survived the refusal
  EXPECT_EQ(value(*registry, "workqueue_adds_total"), 1);

  WorkQueue other({.name = "other", .clock = clock, .registry = metrics});
  other.add("x");
  EXPECT_EQ(value(*registry, "workqueue_adds_total", "other"), 1);
  EXPECT_EQ(value(*registry, "workqueue_adds_total", "q"), 1);

  queue.reset();
  EXPECT_FALSE(series(*registry, "workqueue_depth", "q"));  // its series are gone
  EXPECT_TRUE(series(*registry, "workqueue_depth", "other"));
  WorkQueue again({.name = "q", .clock = clock, .registry = metrics});
  EXPECT_EQ(value(*registry, "workqueue_adds_total"), 0);
}

// A registry that refuses one of a queue's series: the queue is not made, and leaves neither the
// series added before the refusal nor its name behind (a queue of that name is made later, while
// another queue keeps the families the refused one took its name in).
TEST_F(WorkQueueMetricsTest, AQueueWhoseSeriesTheRegistryRefusesLeavesNoSeriesAndNoName) {
  queue.reset();  // its families go with it: the refusing registry makes them anew
  auto refusing = std::make_shared<testing::RefusingRegistry>(metrics, "workqueue_retries_total");
  WorkQueue keeper({.name = "p", .clock = clock, .registry = refusing});
  refusing->refuse = true;
  EXPECT_THROW(WorkQueue({.name = "r", .clock = clock, .registry = refusing}), std::runtime_error);
  EXPECT_FALSE(series(*registry, "workqueue_depth", "r"))
      << "a series of the refused queue is left";
  EXPECT_FALSE(series(*registry, "workqueue_adds_total", "r"));
  refusing->refuse = false;
  WorkQueue accepted({.name = "r", .clock = clock, .registry = refusing});
  accepted.add("a");
  EXPECT_EQ(value(*registry, "workqueue_adds_total", "r"), 1);
  EXPECT_TRUE(series(*registry, "workqueue_depth", "p")) << "the other queue's series stay";
}

// The same for a leader elector: its master-status series, added before the refused one, goes,
// and so does its name.
TEST_F(WorkQueueMetricsTest, AnElectorWhoseSeriesTheRegistryRefusesLeavesNoSeriesAndNoName) {
  auto refusing =
      std::make_shared<testing::RefusingRegistry>(metrics, "leader_election_slowpath_total");
  detail::LeaderElectionMetrics keeper(refusing, "p");
  refusing->refuse = true;
  EXPECT_THROW(detail::LeaderElectionMetrics(refusing, "lease"), std::runtime_error);
  EXPECT_FALSE(series(*registry, "leader_election_master_status", "lease"))
      << "a series of the refused elector is left";
  refusing->refuse = false;
  detail::LeaderElectionMetrics accepted(refusing, "lease");
  accepted.leading(true);
  auto master = series(*registry, "leader_election_master_status", "lease");
  ASSERT_TRUE(master);
  EXPECT_EQ(master->gauge.value, 1);
}

// Two wrappers of one prometheus registry are one registry: a second queue named q is refused
// there too (else the two would share the series, and the first one's removal would free it
// under the second).
TEST_F(WorkQueueMetricsTest, TwoWrappersOfOnePrometheusRegistryAreOneForNames) {
  auto shared = std::make_shared<prometheus::Registry>();
  WorkQueue first({.name = "q",
                   .clock = clock,
                   .registry = std::make_shared<prom::PrometheusRegistry>(shared)});
  EXPECT_THROW(WorkQueue({.name = "q",
                          .clock = clock,
                          .registry = std::make_shared<prom::PrometheusRegistry>(shared)}),
               client::ConfigError);
  first.add("a");
  EXPECT_EQ(value(*shared, "workqueue_adds_total", "q"), 1);
}

// The null registry keeps nothing: queues of one name, or of none, are all accepted.
TEST_F(WorkQueueMetricsTest, TheNullRegistryKeepsNoNames) {
  WorkQueue a({.name = "q", .registry = informer::MetricsRegistry::null()});
  WorkQueue b({.name = "q", .registry = informer::MetricsRegistry::null()});
  WorkQueue unnamed({.registry = informer::MetricsRegistry::null()});
  a.add("k");
  unnamed.add("k");
  EXPECT_EQ(a.len() + unnamed.len(), 2u);
}

TEST_F(WorkQueueMetricsTest, FamiliesAreRegisteredOncePerRegistry) {
  // A registry that throws on a second registration of a family name.
  auto registry =
      std::make_shared<prometheus::Registry>(prometheus::Registry::InsertBehavior::Throw);
  auto throwing = std::make_shared<prom::PrometheusRegistry>(registry);
  WorkQueue a({.name = "a", .registry = throwing});
  WorkQueue b({.name = "b", .registry = throwing});
  a.add("k");
  b.add("k");
  EXPECT_EQ(value(*registry, "workqueue_adds_total", "a"), 1);
  EXPECT_EQ(value(*registry, "workqueue_adds_total", "b"), 1);
}

TEST_F(WorkQueueMetricsTest, ARegistryNeedsAQueueName) {
  EXPECT_THROW(WorkQueue({.registry = std::make_shared<prom::PrometheusRegistry>()}),
               client::ConfigError);
  WorkQueue unnamed;  // no registry: no metrics, no name needed
  unnamed.add("a");
  EXPECT_EQ(unnamed.len(), 1u);
}

}  // namespace
}  // namespace kinformer::controller
