// EndpointIndex tests: one test per rule of the index (see the class comment), each named in
// the mutant that breaks the rule (tests/mutation/endpoint-index-*.mutant).
#include "kinformer/mesh/endpoint_index.h"

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace kinformer::mesh {
namespace {

using cache::LabelSelector;

const std::string kC1 = "c1";
const std::string kC2 = "c2";

client::StringMap sorted(client::StringMap m) {
  std::sort(m.begin(), m.end());
  return m;
}

struct Ep {
  std::string address;
  std::string pod;  // "" = no targetRef
  std::optional<bool> ready;
  std::optional<bool> serving;
  std::optional<bool> terminating;
};

std::shared_ptr<const client::EndpointSlice> slice(
    std::string name, std::string service, std::vector<Ep> eps,
    std::vector<client::SlicePort> ports = {{"http", 8080, "TCP", ""}}, std::string ns = "ns") {
  auto s = std::make_shared<client::EndpointSlice>();
  s->metadata.namespace_ = ns;
  s->metadata.name = std::move(name);
  if (!service.empty()) s->metadata.labels = {{"kubernetes.io/service-name", std::move(service)}};
  s->address_type = "IPv4";
  s->ports = std::move(ports);
  for (auto& e : eps) {
    client::SliceEndpoint se;
    se.addresses = {e.address};
    se.ready = e.ready;
    se.serving = e.serving;
    se.terminating = e.terminating;
    se.node_name = "node-" + e.address;
    se.zone = "zone-a";
    if (!e.pod.empty()) se.target_ref = client::ObjectReference{"Pod", ns, e.pod, "uid-" + e.pod};
    s->endpoints.push_back(std::move(se));
  }
  return s;
}

std::shared_ptr<const client::Pod> pod(std::string name, client::StringMap labels,
                                       std::string ns = "ns") {
  auto p = std::make_shared<client::Pod>();
  p->metadata.namespace_ = std::move(ns);
  p->metadata.name = std::move(name);
  p->metadata.labels = sorted(std::move(labels));
  return p;
}

EndpointQuery query(std::string service, std::string port = "http", std::string selector = "") {
  EndpointQuery q;
  q.service = {"ns", std::move(service)};
  q.port_name = std::move(port);
  if (!selector.empty()) q.selector = LabelSelector::parse(selector);
  return q;
}

std::vector<std::string> addresses(const ClusterEndpoints* part) {
  std::vector<std::string> out;
  if (part == nullptr) return {"<absent>"};
  for (const auto& e : part->endpoints) out.push_back(e.address);
  return out;
}

std::vector<std::string> addresses(const EndpointSnapshotPtr& s, const std::string& cluster) {
  return addresses(s->cluster(cluster));
}

/// Records every snapshot a watch delivers (the index calls back on the input's thread).
class Recorder {
 public:
  EndpointIndex::Callback callback() {
    return [this](const EndpointSnapshotPtr& s) {
      std::lock_guard lock(mu_);
      snapshots_.push_back(s);
    };
  }
  std::vector<EndpointSnapshotPtr> snapshots() {
    std::lock_guard lock(mu_);
    return snapshots_;
  }
  std::size_t count() { return snapshots().size(); }
  EndpointSnapshotPtr last() {
    auto s = snapshots();
    return s.empty() ? nullptr : s.back();
  }

 private:
  std::mutex mu_;
  std::vector<EndpointSnapshotPtr> snapshots_;
};

// Rule: full replacement. Mutant endpoint-index-shard-merges-previous: the new computation
// starts from the previous shard's endpoints.
TEST(EndpointIndexTest, FullReplacementDropsWhatTheSlicesNoLongerHold) {
  EndpointIndex index;
  Recorder r;
  auto w = index.watch(query("svc"), r.callback());
  index.upsert_slice(kC1, slice("s1", "svc", {{"10.0.0.1"}, {"10.0.0.2"}}));
  EXPECT_EQ(addresses(r.last(), kC1), (std::vector<std::string>{"10.0.0.1", "10.0.0.2"}));

  index.upsert_slice(kC1, slice("s1", "svc", {{"10.0.0.2", "", false}}));
  auto s = r.last();
  EXPECT_EQ(addresses(s, kC1), (std::vector<std::string>{"10.0.0.2"}));
  ASSERT_EQ(s->cluster(kC1)->endpoints.size(), 1u);
  EXPECT_FALSE(s->cluster(kC1)->endpoints[0].ready);    // the new state, not the old
  EXPECT_FALSE(s->cluster(kC1)->endpoints[0].serving);  // unset serving follows ready
  EXPECT_EQ(index.snapshot(query("svc"))->version, s->version);
}

// Rule: an empty shard is a state. Mutant endpoint-index-empty-shard-absent: an empty shard
// reaches subscribers as "no information" (the cluster missing from the snapshot).
TEST(EndpointIndexTest, LastSliceRemovedIsDeliveredAsExplicitEmptySet) {
  EndpointIndex index;
  Recorder r;
  auto w = index.watch(query("svc"), r.callback());
  index.upsert_slice(kC1, slice("s1", "svc", {{"10.0.0.1"}}));
  index.upsert_slice(kC2, slice("s1", "svc", {{"10.1.0.1"}}));
  ASSERT_EQ(r.count(), 2u);

  index.remove_slice(kC1, "ns/s1");
  ASSERT_EQ(r.count(), 3u);
  auto s = r.last();
  ASSERT_NE(s->cluster(kC1), nullptr) << "empty must be a state, not an absent cluster";
  EXPECT_TRUE(s->cluster(kC1)->endpoints.empty());
  EXPECT_EQ(addresses(s, kC2), (std::vector<std::string>{"10.1.0.1"}));
  EXPECT_EQ(s->merged.size(), 1u);
}

TEST(EndpointIndexTest, SliceWithNoEndpointsIsAnExplicitEmptySet) {
  EndpointIndex index;
  Recorder r;
  auto w = index.watch(query("svc"), r.callback());
  EXPECT_EQ(r.count(), 0u);
  index.upsert_slice(kC1, slice("s1", "svc", {}));
  ASSERT_EQ(r.count(), 1u);
  ASSERT_NE(r.last()->cluster(kC1), nullptr);
  EXPECT_TRUE(r.last()->cluster(kC1)->endpoints.empty());
}

// Rule: cross-slice dedupe, the newest slice wins. Mutants endpoint-index-oldest-slice-wins and
// endpoint-index-no-dedupe.
TEST(EndpointIndexTest, AddressInTwoSlicesCountsOnceNewestSliceWins) {
  EndpointIndex index;
  index.upsert_slice(kC1, slice("s1", "svc", {{"10.0.0.1", "", true}, {"10.0.0.2"}}));
  index.upsert_slice(kC1, slice("s2", "svc", {{"10.0.0.1", "", false}}));
  auto s = index.snapshot(query("svc"));
  ASSERT_EQ(addresses(s, kC1), (std::vector<std::string>{"10.0.0.1", "10.0.0.2"}));
  EXPECT_FALSE(s->cluster(kC1)->endpoints[0].ready) << "s2 was written last";

  // s1 written again: now s1 is the newest.
  index.upsert_slice(kC1, slice("s1", "svc", {{"10.0.0.1", "", true}}));
  s = index.snapshot(query("svc"));
  ASSERT_EQ(addresses(s, kC1), (std::vector<std::string>{"10.0.0.1"}));
  EXPECT_TRUE(s->cluster(kC1)->endpoints[0].ready);

  // The winner's slice removed: the other slice's copy is what remains.
  index.remove_slice(kC1, "ns/s1");
  s = index.snapshot(query("svc"));
  ASSERT_EQ(addresses(s, kC1), (std::vector<std::string>{"10.0.0.1"}));
  EXPECT_FALSE(s->cluster(kC1)->endpoints[0].ready);
}

// Rule: a relabelled Pod moves between subsets, and every affected subset is recomputed.
// Mutant endpoint-index-relabel-ignores-old-labels: only subsets matching the new labels are
// recomputed.
TEST(EndpointIndexTest, RelabelledPodMovesBetweenSubsets) {
  EndpointIndex index;
  index.upsert_pod(kC1, pod("p1", {{"app", "a"}, {"tier", "x"}}));
  index.upsert_pod(kC1, pod("p2", {{"app", "b"}}));
  index.upsert_slice(kC1, slice("s1", "svc", {{"10.0.0.1", "p1"}, {"10.0.0.2", "p2"}}));
  Recorder ra, rb, rx, all;
  auto wa = index.watch(query("svc", "http", "app=a"), ra.callback());
  auto wb = index.watch(query("svc", "http", "app=b"), rb.callback());
  auto wx = index.watch(query("svc", "http", "tier=x"), rx.callback());
  auto wall = index.watch(query("svc"), all.callback());
  EXPECT_EQ(addresses(index.snapshot(query("svc", "http", "app=a")), kC1),
            (std::vector<std::string>{"10.0.0.1"}));

  index.upsert_pod(kC1, pod("p1", {{"app", "b"}, {"tier", "x"}}));
  ASSERT_NE(ra.last(), nullptr) << "the app=a subset was not recomputed";
  ASSERT_NE(rb.last(), nullptr) << "the app=b subset was not recomputed";
  EXPECT_EQ(addresses(ra.last(), kC1), (std::vector<std::string>{})) << "left app=a";
  EXPECT_EQ(addresses(rb.last(), kC1), (std::vector<std::string>{"10.0.0.1", "10.0.0.2"}))
      << "joined app=b";
  // Still in tier=x, with its new labels.
  ASSERT_EQ(rx.count(), 1u);
  ASSERT_EQ(rx.last()->cluster(kC1)->endpoints.size(), 1u);
  EXPECT_EQ(*client::find_value(rx.last()->cluster(kC1)->endpoints[0].pod_labels, "app"), "b");
  ASSERT_EQ(all.count(), 1u);

  // A Pod update that keeps its labels recomputes nothing.
  auto same = std::make_shared<client::Pod>(*pod("p1", {{"app", "b"}, {"tier", "x"}}));
  same->phase = "Running";
  index.upsert_pod(kC1, same);
  EXPECT_EQ(ra.count(), 1u);
  EXPECT_EQ(rb.count(), 1u);
  EXPECT_EQ(all.count(), 1u);

  // Removing the Pod: its endpoint keeps no labels, so it leaves the app=b subset.
  index.remove_pod(kC1, "ns/p1");
  EXPECT_EQ(addresses(rb.last(), kC1), (std::vector<std::string>{"10.0.0.2"}));
  EXPECT_EQ(addresses(all.last(), kC1), (std::vector<std::string>{"10.0.0.1", "10.0.0.2"}));
  EXPECT_FALSE(all.last()->cluster(kC1)->endpoints[0].pod_known);
}

// Rule: where the affected subsets cannot be known (the Pod was not in the index), every subset
// of the service is recomputed. Mutant endpoint-index-unknown-pod-not-conservative.
TEST(EndpointIndexTest, PodArrivingAfterItsEndpointRecomputesEverySubset) {
  EndpointIndex index;
  index.upsert_slice(kC1, slice("s1", "svc", {{"10.0.0.1", "p1"}}));
  Recorder unlabelled, labelled;
  auto wu = index.watch(query("svc", "http", "!app"), unlabelled.callback());
  auto wl = index.watch(query("svc", "http", "app=a"), labelled.callback());
  EXPECT_EQ(addresses(index.snapshot(query("svc", "http", "!app")), kC1),
            (std::vector<std::string>{"10.0.0.1"}));

  index.upsert_pod(kC1, pod("p1", {{"app", "a"}}));
  ASSERT_NE(unlabelled.last(), nullptr) << "the !app subset was not recomputed";
  EXPECT_EQ(addresses(unlabelled.last(), kC1), (std::vector<std::string>{}));
  EXPECT_EQ(addresses(labelled.last(), kC1), (std::vector<std::string>{"10.0.0.1"}));
  EXPECT_TRUE(labelled.last()->cluster(kC1)->endpoints[0].pod_known);
}

// Rule: removing a cluster removes all its shards and notifies every affected service.
// Mutant endpoint-index-remove-cluster-silent.
TEST(EndpointIndexTest, RemoveClusterRemovesItsShardsAndNotifiesEveryService) {
  EndpointIndex index;
  index.upsert_slice(kC1, slice("a1", "a", {{"10.0.0.1"}}));
  index.upsert_slice(kC1, slice("b1", "b", {{"10.0.0.2"}}));
  index.upsert_slice(kC2, slice("a1", "a", {{"10.1.0.1"}}));
  Recorder ra, rb;
  auto wa = index.watch(query("a"), ra.callback());
  auto wb = index.watch(query("b"), rb.callback());

  index.remove_cluster(kC1);
  ASSERT_EQ(ra.count(), 1u);
  ASSERT_EQ(rb.count(), 1u);
  EXPECT_EQ(ra.last()->cluster(kC1), nullptr);
  EXPECT_EQ(addresses(ra.last(), kC2), (std::vector<std::string>{"10.1.0.1"}));
  EXPECT_TRUE(rb.last()->clusters.empty());
  EXPECT_EQ(index.clusters(), (std::vector<std::string>{kC2}));
  EXPECT_EQ(index.snapshot(query("b"))->cluster(kC1), nullptr);

  // The cluster coming back starts from nothing: no slice of the old one survives.
  index.upsert_slice(kC1, slice("b2", "b", {{"10.0.0.3"}}));
  EXPECT_EQ(addresses(rb.last(), kC1), (std::vector<std::string>{"10.0.0.3"}));
}

TEST(EndpointIndexTest, SliceRelabelledToAnotherServiceLeavesTheOld) {
  EndpointIndex index;
  Recorder ra, rb;
  auto wa = index.watch(query("a"), ra.callback());
  auto wb = index.watch(query("b"), rb.callback());
  index.upsert_slice(kC1, slice("s1", "a", {{"10.0.0.1"}}));
  index.upsert_slice(kC1, slice("s1", "b", {{"10.0.0.1"}}));
  EXPECT_EQ(addresses(ra.last(), kC1), (std::vector<std::string>{}));
  EXPECT_EQ(addresses(rb.last(), kC1), (std::vector<std::string>{"10.0.0.1"}));
  // A slice without the service label belongs to no service.
  index.upsert_slice(kC1, slice("s1", "", {{"10.0.0.1"}}));
  EXPECT_EQ(addresses(rb.last(), kC1), (std::vector<std::string>{}));
}

TEST(EndpointIndexTest, SubsetsSelectByPortNameAndConditionsDefaultAsTheApiSays) {
  EndpointIndex index;
  index.upsert_slice(
      kC1,
      slice("s1", "svc", {{"10.0.0.1"}, {"10.0.0.2", "", true, false, true}},
            {{"http", 8080, "TCP", "http"}, {"grpc", 9090, "TCP", ""}, {"all", {}, "TCP", ""}}));
  index.upsert_slice(kC1, slice("s2", "svc", {{"10.0.0.3"}}, {{"metrics", 9100, "TCP", ""}}));
  auto http = index.snapshot(query("svc", "http"));
  EXPECT_EQ(addresses(http, kC1), (std::vector<std::string>{"10.0.0.1", "10.0.0.2"}));
  const Endpoint& e1 = http->cluster(kC1)->endpoints[0];
  EXPECT_TRUE(e1.ready);
  EXPECT_TRUE(e1.serving);
  EXPECT_FALSE(e1.terminating);
  EXPECT_EQ(e1.node_name, "node-10.0.0.1");
  EXPECT_EQ(e1.zone, "zone-a");
  ASSERT_NE(e1.port("grpc"), nullptr);
  EXPECT_EQ(e1.port("grpc")->port, 9090);
  EXPECT_EQ(e1.port("http")->app_protocol, "http");
  EXPECT_EQ(e1.port("all"), nullptr) << "a port without a number is not routable by name";
  const Endpoint& e2 = http->cluster(kC1)->endpoints[1];
  EXPECT_TRUE(e2.ready);
  EXPECT_FALSE(e2.serving);
  EXPECT_TRUE(e2.terminating);
  EXPECT_EQ(addresses(index.snapshot(query("svc", "metrics")), kC1),
            (std::vector<std::string>{"10.0.0.3"}));
  EXPECT_EQ(addresses(index.snapshot(query("svc", "nope")), kC1), (std::vector<std::string>{}));
}

TEST(EndpointIndexTest, CoreV1EndpointsForAClusterWithoutSlices) {
  EndpointIndex index;
  auto eps = std::make_shared<client::Endpoints>();
  eps->metadata.namespace_ = "ns";
  eps->metadata.name = "svc";
  client::EndpointSubset subset;
  subset.addresses = {{"10.0.0.1", "", "n1", client::ObjectReference{"Pod", "ns", "p1", "u"}}};
  subset.not_ready_addresses = {{"10.0.0.2", "", "n2", std::nullopt}};
  subset.ports = {{"http", 80, "TCP", ""}};
  eps->subsets = {subset};
  index.upsert_pod(kC1, pod("p1", {{"app", "a"}}));
  EXPECT_TRUE(index.upsert_endpoints(kC1, eps));
  EXPECT_FALSE(index.upsert_slice(kC1, slice("s1", "svc", {{"10.9.9.9"}})))
      << "the cluster's source is Endpoints";
  auto s = index.snapshot(query("svc"));
  ASSERT_EQ(addresses(s, kC1), (std::vector<std::string>{"10.0.0.1", "10.0.0.2"}));
  EXPECT_TRUE(s->cluster(kC1)->endpoints[0].ready);
  EXPECT_EQ(s->cluster(kC1)->endpoints[0].port("http")->port, 80);
  EXPECT_FALSE(s->cluster(kC1)->endpoints[1].ready);
  EXPECT_EQ(addresses(index.snapshot(query("svc", "http", "app=a")), kC1),
            (std::vector<std::string>{"10.0.0.1"}));

  // Another cluster on slices, merged with this one.
  index.upsert_slice(kC2, slice("s1", "svc", {{"10.1.0.1"}}));
  EXPECT_FALSE(index.upsert_endpoints(kC2, eps));
  EXPECT_EQ(index.snapshot(query("svc"))->merged.size(), 3u);

  // Empty subsets are a state too; removing the Endpoints leaves an empty shard.
  auto empty = std::make_shared<client::Endpoints>();
  empty->metadata = eps->metadata;
  index.upsert_endpoints(kC1, empty);
  EXPECT_EQ(addresses(index.snapshot(query("svc")), kC1), (std::vector<std::string>{}));
  index.upsert_endpoints(kC1, eps);
  index.remove_endpoints(kC1, "ns/svc");
  EXPECT_EQ(addresses(index.snapshot(query("svc")), kC1), (std::vector<std::string>{}));
}

TEST(EndpointIndexTest, SnapshotsAreImmutableAndVersionsIncrease) {
  EndpointIndex index;
  Recorder r;
  EndpointSnapshotPtr first;
  auto w = index.watch(query("svc"), r.callback(), &first);
  ASSERT_NE(first, nullptr);
  EXPECT_TRUE(first->clusters.empty());
  index.upsert_slice(kC1, slice("s1", "svc", {{"10.0.0.1"}}));
  index.upsert_slice(kC2, slice("s1", "svc", {{"10.1.0.1"}}));
  index.upsert_slice(kC1, slice("s1", "svc", {{"10.0.0.9"}}));
  auto snaps = r.snapshots();
  ASSERT_EQ(snaps.size(), 3u);
  EXPECT_LT(first->version, snaps[0]->version);
  EXPECT_LT(snaps[0]->version, snaps[1]->version);
  EXPECT_LT(snaps[1]->version, snaps[2]->version);
  EXPECT_EQ(addresses(snaps[0], kC1),
            (std::vector<std::string>{"10.0.0.1"}));  // unchanged by later input
  EXPECT_EQ(snaps[1]->cluster(kC2), snaps[2]->cluster(kC2))
      << "an unchanged cluster's part is shared";
  ASSERT_EQ(snaps[2]->merged.size(), 2u);
  EXPECT_EQ(snaps[2]->merged[0].cluster->cluster, kC1);
  EXPECT_EQ(snaps[2]->merged[0].endpoint->address, "10.0.0.9");
  EXPECT_EQ(snaps[2]->merged[1].cluster->cluster, kC2);

  // An input that changes nothing in the subset publishes nothing.
  index.upsert_slice(kC1, slice("s1", "svc", {{"10.0.0.9"}}));
  index.upsert_slice(kC1, slice("other", "svc2", {{"10.0.0.5"}}));
  EXPECT_EQ(r.count(), 3u);
}

TEST(EndpointIndexTest, ClosedWatchIsNotCalledAndCallbacksMayReenterTheIndex) {
  EndpointIndex index;
  Recorder r;
  auto w = index.watch(query("svc"), r.callback());
  EXPECT_EQ(index.subset_count(), 1u);
  std::optional<EndpointIndex::Watch> self;
  int calls = 0;
  self.emplace(index.watch(query("svc", "http", "app"), [&](const EndpointSnapshotPtr& s) {
    ++calls;
    EXPECT_EQ(index.snapshot(query("svc", "http", "app"))->version, s->version);
    self->close();  // from inside its own callback
  }));
  EXPECT_EQ(index.subset_count(), 2u);
  index.upsert_pod(kC1, pod("p1", {{"app", "x"}}));
  index.upsert_slice(kC1, slice("s1", "svc", {{"10.0.0.1", "p1"}}));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(index.subset_count(), 1u);
  w.close();
  EXPECT_EQ(index.subset_count(), 0u);
  index.upsert_slice(kC1, slice("s1", "svc", {{"10.0.0.2"}}));
  EXPECT_EQ(r.count(), 1u);
  EXPECT_EQ(calls, 1);
}

TEST(EndpointIndexTest, WatchMayOutliveTheIndex) {
  std::optional<EndpointIndex::Watch> w;
  {
    EndpointIndex index;
    w.emplace(index.watch(query("svc"), [](const EndpointSnapshotPtr&) {}));
  }
  w->close();
  EXPECT_FALSE(w->active());
}

}  // namespace
}  // namespace kinformer::mesh

namespace kinformer::mesh {
namespace {

// A clock the test moves by hand.
class StepClock : public client::Clock {
 public:
  TimePoint now() const override {
    std::lock_guard lock(mu_);
    return now_;
  }
  bool sleep_for(Duration d, std::stop_token) override {
    advance(d);
    return true;
  }
  void advance(Duration d) {
    std::lock_guard lock(mu_);
    now_ += d;
  }

 private:
  mutable std::mutex mu_;
  TimePoint now_{};
};

// Rule: fencing. Once a cluster is fenced at an epoch, input of an earlier epoch is dropped and
// counted: an old client's late delivery (an older version, a slice the new client saw deleted,
// a removal) never lands. Input of the fence's epoch or later is taken. Mutant
// endpoint-index-fence-open.
TEST(EndpointIndexTest, AFenceDropsInputOfEarlierEpochs) {
  EndpointIndex index;
  ASSERT_TRUE(index.upsert_slice(kC1, slice("s1", "svc", {{"10.0.0.1", ""}}), 1));
  index.fence(kC1, 2);
  ASSERT_TRUE(index.upsert_slice(kC1, slice("s1", "svc", {{"10.0.0.2", ""}}), 2));

  EXPECT_FALSE(index.upsert_slice(kC1, slice("s1", "svc", {{"10.0.0.1", ""}}), 1));
  EXPECT_FALSE(index.upsert_slice(kC1, slice("s9", "svc", {{"10.0.0.9", ""}}), 1));
  EXPECT_FALSE(index.remove_slice(kC1, "ns/s1", 1));
  EXPECT_FALSE(index.upsert_pod(kC1, pod("p1", {{"app", "a"}}), 1));
  EXPECT_FALSE(index.upsert_slice(kC1, slice("s8", "svc", {{"10.0.0.8", ""}})));  // epoch 0
  EXPECT_EQ(index.dropped_writes(), 5u);
  EXPECT_EQ(addresses(index.snapshot(query("svc")), kC1), std::vector<std::string>{"10.0.0.2"});
  EXPECT_EQ(index.keys(kC1).slices.size(), 1u);
  EXPECT_TRUE(index.keys(kC1).pods.empty());

  // A fence never goes down; a later epoch is taken; another cluster is not fenced.
  index.fence(kC1, 1);
  EXPECT_FALSE(index.upsert_slice(kC1, slice("s1", "svc", {{"10.0.0.1", ""}}), 1));
  EXPECT_TRUE(index.upsert_slice(kC1, slice("s2", "svc", {{"10.0.0.3", ""}}), 3));
  EXPECT_TRUE(index.upsert_slice(kC2, slice("s1", "svc", {{"10.1.0.1", ""}})));
  // A removed cluster stays fenced: a late write of an older client cannot bring it back.
  index.fence(kC1, 3);
  EXPECT_TRUE(index.remove_cluster(kC1, 3));
  EXPECT_FALSE(index.upsert_slice(kC1, slice("s1", "svc", {{"10.0.0.1", ""}}), 2));
  EXPECT_EQ(addresses(index.snapshot(query("svc")), kC1), std::vector<std::string>{"<absent>"});
}

// Rule: forgetting. A service with no slice in any cluster for forget_after loses its shards;
// its watched subsets get a snapshot without clusters, marked forgotten. A service that still
// has a slice somewhere, or gets one back in time, stays. Mutant endpoint-index-never-forgets.
TEST(EndpointIndexTest, AServiceGoneFromEveryClusterIsForgottenAfterTheGracePeriod) {
  auto clock = std::make_shared<StepClock>();
  EndpointIndex index({.forget_after = std::chrono::minutes(5), .clock = clock});
  Recorder gone_rec;
  Recorder kept_rec;
  auto gone_watch = index.watch(query("gone"), gone_rec.callback());
  auto kept_watch = index.watch(query("kept"), kept_rec.callback());
  index.upsert_slice(kC1, slice("g1", "gone", {{"10.0.0.1", "p1"}}));
  index.upsert_slice(kC2, slice("g2", "gone", {{"10.1.0.1", ""}}));
  index.upsert_slice(kC1, slice("k1", "kept", {{"10.0.0.5", ""}}));
  index.upsert_slice(kC2, slice("k2", "kept", {{"10.1.0.5", ""}}));
  index.upsert_pod(kC1, pod("p1", {{"app", "a"}}));
  ASSERT_EQ(index.service_count(), 2u);

  // "gone" loses its slices in both clusters; "kept" only in one. Empty shards are a state.
  index.remove_slice(kC1, "ns/g1");
  index.remove_slice(kC2, "ns/g2");
  index.remove_slice(kC2, "ns/k2");
  auto last = gone_rec.last();
  EXPECT_FALSE(last->forgotten);
  EXPECT_EQ(addresses(last, kC1), std::vector<std::string>{});
  EXPECT_EQ(addresses(last, kC2), std::vector<std::string>{});

  clock->advance(std::chrono::minutes(4));
  EXPECT_EQ(index.sweep(), 0u);
  EXPECT_EQ(index.service_count(), 2u);
  clock->advance(std::chrono::minutes(1));
  // Any input sweeps; "kept" has a slice in kC1 still.
  index.upsert_pod(kC1, pod("p2", {{"app", "b"}}));
  EXPECT_EQ(index.service_count(), 1u);
  last = gone_rec.last();
  EXPECT_TRUE(last->forgotten);
  EXPECT_TRUE(last->clusters.empty());
  EXPECT_TRUE(index.snapshot(query("gone"))->forgotten) << "a watched subset says so";
  EXPECT_FALSE(kept_rec.last()->forgotten);
  EXPECT_EQ(addresses(index.snapshot(query("kept")), kC2), std::vector<std::string>{});

  // A slice coming back brings the service back; one that comes back within the grace period
  // keeps it from being forgotten.
  index.upsert_slice(kC1, slice("g1", "gone", {{"10.0.0.7", ""}}));
  last = gone_rec.last();
  EXPECT_FALSE(last->forgotten);
  EXPECT_EQ(addresses(last, kC1), std::vector<std::string>{"10.0.0.7"});
  index.remove_slice(kC1, "ns/g1");
  clock->advance(std::chrono::minutes(3));
  index.upsert_slice(kC2, slice("g2", "gone", {{"10.1.0.7", ""}}));
  clock->advance(std::chrono::minutes(10));
  EXPECT_EQ(index.sweep(), 0u);
  EXPECT_EQ(index.service_count(), 2u);
}

}  // namespace
}  // namespace kinformer::mesh
