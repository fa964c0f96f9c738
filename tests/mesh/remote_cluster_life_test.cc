// RemoteClusterLife: one remote cluster's state machine, driven with explicit times.
#include "remote_cluster_life.h"

#include <gtest/gtest.h>

#include "kinformer/informer/metrics_registry.h"

#include "kinformer/client/pod.h"
#include "log_capture.h"

namespace kinformer::mesh::detail {
namespace {

using namespace std::chrono_literals;

std::string kubeconfig(const std::string& token) {
  // Nothing listens on port 1: the clients never sync.
  return "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: c\n  cluster:\n"
         "    server: http://127.0.0.1:1\ncontexts:\n- name: c\n  context:\n    cluster: c\n"
         "    user: u\nusers:\n- name: u\n  user:\n    token: " +
         token + "\n";
}

// The active client's sync timeout passes while a new client (from an edited kubeconfig) is
// still syncing: the active one is settled then (timed out), and the next deadline is a later
// one. (The worker sleeps until next_deadline(): one that stayed in the past made it spin until
// the new client synced or timed out.) Mutant registry-active-timeout-waits-for-pending.
TEST(RemoteClusterLifeTest, TheActiveClientTimesOutOnTimeWhileANewOneSyncs) {
  testing::LogCapture capture;
  client::Logger log(capture.sink());
  RegistryMetrics metrics(*informer::MetricsRegistry::null());
  RemoteSettings settings;
  settings.policy.allow_insecure = true;
  settings.factory.use_watch_list = false;
  settings.factory.log = capture.sink();
  settings.client.log = capture.sink();
  RemoteClusterLife life("west", 30s, log, metrics);
  std::vector<RemoteClusterPtr> retire;

  const WantedCluster first{"mesh/remotes", kubeconfig("t1")};
  auto added =
      life.apply(first, build_remote("west", first, life.next_generation(), settings), retire);
  ASSERT_TRUE(added);
  EXPECT_EQ(added->kind, ClusterEvent::Kind::added);
  (void)life.active()->factory->informer<client::Pod>();  // something to sync, not a probe
  const WantedCluster second{"mesh/remotes", kubeconfig("t2")};
  ASSERT_FALSE(
      life.apply(second, build_remote("west", second, life.next_generation(), settings), retire));

  const auto first_deadline = life.next_deadline();
  EXPECT_TRUE(life.settle(first_deadline - 1ms, retire).empty());
  EXPECT_FALSE(life.settled());
  // The active client's deadline (it was built first); the new client's comes later.
  EXPECT_TRUE(life.settle(first_deadline, retire).empty());
  EXPECT_TRUE(life.settled());
  EXPECT_EQ(life.status().state, ClusterState::timed_out);
  EXPECT_GT(life.next_deadline(), first_deadline);

  // The new client's deadline: the switch, as before.
  auto events = life.settle(life.next_deadline(), retire);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, ClusterEvent::Kind::updated);
  EXPECT_EQ(life.next_deadline(), SteadyClock::time_point::max());
  for (auto& c : life.release()) retire.push_back(std::move(c));
  for (auto& c : retire) c->factory->shutdown();
}

}  // namespace
}  // namespace kinformer::mesh::detail
