// EndpointFeed tests: a cluster's EndpointSlice and Pod informers (scripted lister-watchers)
// feeding an EndpointIndex, delivered through EndpointSubscriptions. Deadlines are failure
// guards only.
#include "kinformer/mesh/endpoint_feed.h"

#include <map>

#include <gtest/gtest.h>

#include "fakes.h"
#include "kinformer/client/endpoint_slice.h"
#include "kinformer/client/endpoints.h"
#include "kinformer/client/pod.h"
#include "kinformer/mesh/endpoint_subscriptions.h"

namespace kinformer::mesh {
namespace {

using namespace informer;

using namespace std::chrono_literals;
using testing::FakeListerWatcher;
using testing::ListerWatcherProxy;

/// One InformerFactory whose lister-watchers are scripted per resource.
struct Cluster {
  std::map<std::string, std::shared_ptr<FakeListerWatcher>> fakes{
      {"endpointslices", std::make_shared<FakeListerWatcher>()},
      {"endpoints", std::make_shared<FakeListerWatcher>()},
      {"pods", std::make_shared<FakeListerWatcher>()}};
  std::shared_ptr<testing::ManualClock> clock =
      std::make_shared<testing::ManualClock>(std::chrono::hours(1));
  std::unique_ptr<InformerFactory> factory;

  /// `pool_threads` > 0: handlers run on that many threads, never compensated (a stuck handler
  /// holds its thread); 0: the factory's default pool.
  explicit Cluster(std::size_t pool_threads = 0) {
    FactoryOptions o;
    o.clock = clock;
    o.random = [] { return 0.5; };
    o.handler_stop_timeout = 2000ms;
    if (pool_threads > 0) {
      o.executor.threads = pool_threads;
      o.executor.blocking_threshold = std::chrono::hours(1);
      o.executor.max_extra_threads = 0;
    }
    factory = std::make_unique<InformerFactory>(
        [this](const client::ResourceType& type, const std::string&) {
          return std::make_unique<ListerWatcherProxy>(fakes.at(type.gvr.resource));
        },
        std::move(o));
  }
  ~Cluster() { factory.reset(); }
  FakeListerWatcher& fake(const std::string& resource) { return *fakes.at(resource); }
};

std::shared_ptr<client::EndpointSlice> feed_slice(
    std::string name, std::vector<std::pair<std::string, std::string>> eps, std::string rv = "1") {
  auto s = std::make_shared<client::EndpointSlice>();
  s->metadata.namespace_ = "ns";
  s->metadata.name = std::move(name);
  s->metadata.resource_version = std::move(rv);
  s->metadata.labels = {{"kubernetes.io/service-name", "svc"}};
  s->ports = {{"http", 80, "TCP", ""}};
  for (auto& [address, pod] : eps) {
    client::SliceEndpoint e;
    e.addresses = {address};
    e.target_ref = client::ObjectReference{"Pod", "ns", pod, ""};
    s->endpoints.push_back(std::move(e));
  }
  return s;
}

std::shared_ptr<client::Pod> pod(std::string name, std::string app, std::string rv = "1") {
  auto p = std::make_shared<client::Pod>();
  p->metadata.namespace_ = "ns";
  p->metadata.name = std::move(name);
  p->metadata.resource_version = std::move(rv);
  p->metadata.labels = {{"app", std::move(app)}};
  return p;
}

/// The fakes script LISTs: ask for LIST explicitly (main's factory default becomes WatchList).
EndpointFeedOptions list_options(EndpointSource source = EndpointSource::slices) {
  EndpointFeedOptions o;
  o.source = source;
  o.endpoints.use_watch_list = false;
  o.pods.use_watch_list = false;
  return o;
}

EndpointQuery query(std::string selector = "") {
  EndpointQuery q;
  q.service = {"ns", "svc"};
  q.port_name = "http";
  if (!selector.empty()) q.selector = cache::LabelSelector::parse(selector);
  return q;
}

/// The newest snapshot a subscriber received.
class Latest {
 public:
  void set(const EndpointSnapshotPtr& s) {
    std::lock_guard lock(mu_);
    s_ = s;
    cv_.notify_all();
  }
  /// Waits until the newest snapshot's part of `cluster` holds exactly `addresses`.
  bool wait_addresses(const std::string& cluster, std::vector<std::string> addresses) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, testing::kDeadline, [&] {
      if (!s_) return false;
      const auto* part = s_->cluster(cluster);
      if (part == nullptr) return false;
      std::vector<std::string> got;
      for (const auto& e : part->endpoints) got.push_back(e.address);
      return got == addresses;
    });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  EndpointSnapshotPtr s_;
};

TEST(EndpointFeedTest, SlicesAndPodsReachSubscribersAndDeletesEmptyTheShard) {
  Cluster c1;
  c1.fake("endpointslices")
      .add_list({feed_slice("s1", {{"10.0.0.1", "p1"}, {"10.0.0.2", "p2"}})}, "10");
  auto slice_watch = c1.fake("endpointslices").add_watch();
  c1.fake("pods").add_list({pod("p1", "a"), pod("p2", "b")}, "20");
  auto pod_watch = c1.fake("pods").add_watch();

  auto index = std::make_shared<EndpointIndex>();
  EndpointFeed feed(index, "c1", *c1.factory, list_options());
  EndpointSubscriptions subs(index, c1.factory->executor_ptr());
  Latest a, all;
  auto sa = subs.subscribe(query("app=a"), [&](const EndpointSnapshotPtr& s) { a.set(s); });
  auto sall = subs.subscribe(query(), [&](const EndpointSnapshotPtr& s) { all.set(s); });
  c1.factory->start();
  ASSERT_TRUE(a.wait_addresses("c1", {"10.0.0.1"}));
  ASSERT_TRUE(all.wait_addresses("c1", {"10.0.0.1", "10.0.0.2"}));
  EXPECT_TRUE(testing::eventually([&] { return feed.has_synced(); }));

  // p2 relabelled to app=a: it joins the subset.
  pod_watch->push(testing::event(client::EventType::modified, pod("p2", "a", "21")));
  ASSERT_TRUE(a.wait_addresses("c1", {"10.0.0.1", "10.0.0.2"}));

  // The slice deleted: an explicit empty set for c1, not an absent cluster.
  slice_watch->push(testing::event(client::EventType::deleted, feed_slice("s1", {}, "11")));
  ASSERT_TRUE(all.wait_addresses("c1", {}));
  ASSERT_TRUE(a.wait_addresses("c1", {}));

  // Closing the feed with removal: the cluster leaves every snapshot.
  feed.close(true);
  EXPECT_EQ(index->snapshot(query())->cluster("c1"), nullptr);
  EXPECT_EQ(c1.factory->informer_count(), 2u)
      << "the informers stay, for the factory's other users";
  sa.close();
  sall.close();
}

// Each cluster part says how fresh the feed that builds it is, asked when read: the staler of
// its two informers. An index fed by hand says nothing (resyncing, no contact); a feed of an
// older client cannot take the answer back from the newer one.
TEST(EndpointFeedTest, EachClusterPartSaysHowFreshItsFeedIsNow) {
  Cluster c1;
  c1.fake("endpointslices").add_list({feed_slice("s1", {{"10.0.0.1", "p1"}})}, "10");
  auto slice_watch = c1.fake("endpointslices").add_watch();
  c1.fake("pods").add_list({pod("p1", "a")}, "20");
  auto pod_watch = c1.fake("pods").add_watch();
  auto index = std::make_shared<EndpointIndex>();
  EndpointFeedOptions options = list_options();
  options.epoch = 7;
  EndpointFeed feed(index, "c1", *c1.factory, options);
  c1.factory->start();
  ASSERT_TRUE(testing::eventually([&] { return feed.has_synced(); }));
  auto snapshot = index->snapshot(query());
  const ClusterEndpoints* part = snapshot->cluster("c1");
  ASSERT_NE(part, nullptr);
  ASSERT_NE(part->freshness, nullptr);
  ASSERT_TRUE(
      testing::eventually([&] { return part->freshness->get().state == Freshness::State::fresh; }));
  // Both watches open (opening one is contact), then nothing from either server past the 75 s
  // idle deadline.
  ASSERT_TRUE(slice_watch->wait_reader_blocked());
  ASSERT_TRUE(pod_watch->wait_reader_blocked());
  c1.clock->advance(80s);
  Freshness f = part->freshness->get();
  EXPECT_EQ(f.state, Freshness::State::stale);
  EXPECT_GE(f.age, 80s);
  EXPECT_FALSE(index->set_freshness("c1", 6, [] { return Freshness{}; }))
      << "an older client's feed is fenced";
  slice_watch->push(
      testing::event(client::EventType::modified,
                     feed_slice("s1", {{"10.0.0.1", "p1"}, {"10.0.0.2", "p1"}}, "11")));
  ASSERT_TRUE(testing::eventually(
      [&] { return index->snapshot(query())->cluster("c1")->endpoints.size() == 2; }));
  EXPECT_EQ(part->freshness->get().state, Freshness::State::stale)
      << "the slices were heard from, the Pods not: the staler informer counts";
  pod_watch->push(testing::event(client::EventType::modified, pod("p1", "a", "21")));
  EXPECT_TRUE(
      testing::eventually([&] { return part->freshness->get().state == Freshness::State::fresh; }));
}

TEST(EndpointFeedTest, CoreV1EndpointsForAClusterWithoutDiscoveryV1) {
  Cluster c1;
  auto eps = std::make_shared<client::Endpoints>();
  eps->metadata.namespace_ = "ns";
  eps->metadata.name = "svc";
  eps->metadata.resource_version = "5";
  client::EndpointSubset subset;
  subset.addresses = {{"10.0.0.7", "", "n1", client::ObjectReference{"Pod", "ns", "p1", ""}}};
  subset.ports = {{"http", 80, "TCP", ""}};
  eps->subsets = {subset};
  c1.fake("endpoints").add_list({eps}, "5");
  c1.fake("pods").add_list({pod("p1", "a")}, "6");

  auto index = std::make_shared<EndpointIndex>();
  EndpointFeed feed(index, "c1", *c1.factory, list_options(EndpointSource::endpoints));
  EXPECT_THROW(EndpointFeed(index, "c1", *c1.factory, list_options()), std::invalid_argument)
      << "c1 is on core/v1 Endpoints";
  c1.factory->start();
  ASSERT_TRUE(testing::eventually([&] {
    auto snapshot = index->snapshot(query("app=a"));  // keeps the part alive
    const auto* part = snapshot->cluster("c1");
    return part != nullptr && part->endpoints.size() == 1 &&
           part->endpoints[0].address == "10.0.0.7";
  }));
}

}  // namespace
}  // namespace kinformer::mesh

namespace kinformer::mesh {
namespace {

using namespace informer;

// ClusterRegistry's "updated": a new client for the same cluster replaces the old one. The old
// client missed a deletion (its token was already revoked); the new one never saw that slice.
TEST(EndpointFeedTest, MakeBeforeBreakNeverEmptiesTheShardAndPrunesWhatOnlyTheOldClientSaw) {
  Cluster old_client;
  old_client.fake("endpointslices")
      .add_list({feed_slice("s1", {{"10.0.0.1", "p1"}}), feed_slice("s2", {{"10.0.0.2", "p2"}})},
                "10");
  (void)old_client.fake("endpointslices").add_watch();
  old_client.fake("pods").add_list({pod("p1", "a"), pod("p2", "a")}, "20");
  (void)old_client.fake("pods").add_watch();

  auto index = std::make_shared<EndpointIndex>();
  std::mutex mu;
  // "west"'s addresses in every snapshot, by version (callbacks may arrive out of order).
  std::map<std::uint64_t, std::vector<std::string>> by_version;
  auto watch = index->watch(query(), [&](const EndpointSnapshotPtr& s) {
    std::vector<std::string> got{"<absent>"};
    if (const auto* part = s->cluster("west")) {
      got.clear();
      for (const auto& e : part->endpoints) got.push_back(e.address);
    }
    std::lock_guard lock(mu);
    by_version[s->version] = std::move(got);
  });
  auto old_feed =
      std::make_unique<EndpointFeed>(index, "west", *old_client.factory, list_options());
  old_client.factory->start();
  ASSERT_TRUE(testing::eventually([&] { return old_feed->has_synced(); }));
  ASSERT_EQ(index->keys("west").slices,
            (std::map<std::string, std::string>{{"ns/s1", "1"}, {"ns/s2", "1"}}));

  Cluster new_client;
  new_client.fake("endpointslices").add_list({feed_slice("s1", {{"10.0.0.1", "p1"}})}, "12");
  (void)new_client.fake("endpointslices").add_watch();
  new_client.fake("pods").add_list({pod("p1", "a")}, "22");
  (void)new_client.fake("pods").add_watch();
  EndpointFeed new_feed(index, "west", *new_client.factory, list_options());
  new_client.factory->start();
  ASSERT_TRUE(new_client.factory->wait_for_cache_sync(testing::kDeadline));
  old_feed->close(false);
  EXPECT_EQ(new_feed.prune_stale(), 2u);  // s2 and p2
  ASSERT_TRUE(testing::eventually([&] { return new_feed.has_synced(); }));
  EXPECT_EQ(new_feed.prune_stale(), 0u);

  auto keys = index->keys("west");
  EXPECT_EQ(keys.slices, (std::map<std::string, std::string>{{"ns/s1", "1"}}));
  EXPECT_EQ(keys.pods, (std::map<std::string, std::string>{{"ns/p1", "1"}}));
  const auto* part = index->snapshot(query())->cluster("west");
  ASSERT_NE(part, nullptr);
  ASSERT_EQ(part->endpoints.size(), 1u);
  EXPECT_EQ(part->endpoints[0].address, "10.0.0.1");
  std::lock_guard lock(mu);
  std::vector<std::vector<std::string>> seen;
  for (const auto& [version, addresses] : by_version) seen.push_back(addresses);
  ASSERT_FALSE(seen.empty());
  bool had_both = false;
  // The first snapshot may hold either slice (two inputs raced); from the one with both on,
  // the shard is never absent or empty and 10.0.0.1 never leaves it.
  for (const auto& addresses : std::vector(
           std::find_if(seen.begin(), seen.end(), [](const auto& a) { return a.size() == 2; }),
           seen.end())) {
    EXPECT_NE(addresses, std::vector<std::string>{"<absent>"});
    EXPECT_FALSE(addresses.empty());
    EXPECT_NE(std::find(addresses.begin(), addresses.end(), "10.0.0.1"), addresses.end())
        << ::testing::PrintToString(seen);
    had_both = had_both || addresses.size() == 2;
  }
  EXPECT_TRUE(had_both);
  EXPECT_EQ(seen.back(), std::vector<std::string>{"10.0.0.1"});
}

// A switch of client (ClusterRegistry's "updated") while the old client's watch is behind: the
// new feed holds s1 at resourceVersion 12 and no s3 (deleted meanwhile); the old watch then
// delivers s1 at 11 and s3 again. The new feed fenced the cluster at its client's epoch, so
// neither lands: the shard stays what the new client holds, by content and resourceVersion.
// Mutant endpoint-feed-late-delivery-lands.
TEST(EndpointFeedTest, AnOldFeedsLateDeliveryNeverLandsAfterTheSwitch) {
  Cluster old_client;
  old_client.fake("endpointslices")
      .add_list({feed_slice("s1", {{"10.0.0.1", "p1"}}, "10"),
                 feed_slice("s3", {{"10.0.0.3", "p3"}}, "10")},
                "10");
  auto old_watch = old_client.fake("endpointslices").add_watch();
  old_client.fake("pods").add_list({}, "20");
  (void)old_client.fake("pods").add_watch();
  auto index = std::make_shared<EndpointIndex>();
  EndpointFeedOptions old_options = list_options();
  old_options.epoch = 1;  // the old client's
  auto old_feed = std::make_unique<EndpointFeed>(index, "west", *old_client.factory, old_options);
  old_client.factory->start();
  ASSERT_TRUE(testing::eventually([&] { return old_feed->has_synced(); }));
  auto addresses = [&] {
    std::vector<std::string> out;
    const EndpointSnapshotPtr snap = index->snapshot(query());
    if (const auto* part = snap->cluster("west")) {
      for (const auto& e : part->endpoints) out.push_back(e.address);
    }
    return out;
  };
  ASSERT_EQ(addresses(), (std::vector<std::string>{"10.0.0.1", "10.0.0.3"}));

  Cluster new_client;
  new_client.fake("endpointslices").add_list({feed_slice("s1", {{"10.0.0.2", "p1"}}, "12")}, "12");
  (void)new_client.fake("endpointslices").add_watch();
  new_client.fake("pods").add_list({}, "22");
  (void)new_client.fake("pods").add_watch();
  EndpointFeedOptions new_options = list_options();
  new_options.epoch = 2;  // the new client's
  EndpointFeed new_feed(index, "west", *new_client.factory, new_options);
  new_client.factory->start();
  ASSERT_TRUE(testing::eventually([&] { return new_feed.has_synced(); }));
  new_feed.prune_stale();
  ASSERT_TRUE(
      testing::eventually([&] { return addresses() == std::vector<std::string>{"10.0.0.2"}; }));

  old_watch->push(
      testing::event(client::EventType::modified, feed_slice("s1", {{"10.0.0.1", "p1"}}, "11")));
  old_watch->push(
      testing::event(client::EventType::modified, feed_slice("s3", {{"10.0.0.3", "p3"}}, "11")));
  ASSERT_TRUE(testing::eventually([&] { return index->dropped_writes() == 2; }))
      << "the old feed's handler delivered both, and the index dropped them";
  old_feed->close(false);
  EXPECT_EQ(new_feed.prune_stale(), 0u);
  EXPECT_EQ(addresses(), std::vector<std::string>{"10.0.0.2"});
  EXPECT_EQ(index->keys("west").slices, (std::map<std::string, std::string>{{"ns/s1", "12"}}));
}

// Two feeds of one client (two components on one index, or a component rebuilt while the old
// instance still runs) share its epoch: neither fences the other, and a change reaches the
// index through either.
TEST(EndpointFeedTest, FeedsOfOneClientDoNotFenceEachOther) {
  Cluster client;
  client.fake("endpointslices").add_list({feed_slice("s1", {{"10.0.0.1", "p1"}}, "10")}, "10");
  auto watch = client.fake("endpointslices").add_watch();
  client.fake("pods").add_list({}, "20");
  (void)client.fake("pods").add_watch();
  auto index = std::make_shared<EndpointIndex>();
  EndpointFeedOptions o = list_options();
  o.epoch = 7;
  EndpointFeedOptions o2 = o;
  o2.name = "second-component";
  auto first = std::make_unique<EndpointFeed>(index, "west", *client.factory, o);
  EndpointFeed second(index, "west", *client.factory, o2);
  client.factory->start();
  ASSERT_TRUE(testing::eventually([&] { return first->has_synced() && second.has_synced(); }));
  first->close(false);  // the first component goes; the second still feeds
  watch->push(
      testing::event(client::EventType::modified, feed_slice("s1", {{"10.0.0.2", "p1"}}, "11")));
  ASSERT_TRUE(testing::eventually([&] {
    return index->keys("west").slices == std::map<std::string, std::string>{{"ns/s1", "11"}};
  }));
  EXPECT_EQ(index->dropped_writes(), 0u);
}

// After a switch, prune_stale() writes what the new client holds before it removes what only the
// old one held: the EndpointSlice controller replaced slice abc by xyz while the old client was
// behind, and the shard must never be empty in between. The new feed's handlers are held (a
// stuck handler first in line on a one-thread pool), so only prune_stale() writes here. Mutant
// endpoint-feed-prune-removes-first.
TEST(EndpointFeedTest, PruneWritesTheNewClientsSlicesBeforeItRemovesTheOldOnes) {
  Cluster old_client;
  old_client.fake("endpointslices").add_list({feed_slice("abc", {{"10.0.0.1", "p1"}}, "10")}, "10");
  (void)old_client.fake("endpointslices").add_watch();
  old_client.fake("pods").add_list({}, "20");
  (void)old_client.fake("pods").add_watch();
  auto index = std::make_shared<EndpointIndex>();
  auto old_feed =
      std::make_unique<EndpointFeed>(index, "west", *old_client.factory, list_options());
  old_client.factory->start();
  ASSERT_TRUE(testing::eventually([&] { return old_feed->has_synced(); }));

  Cluster new_client(/*pool_threads=*/1);
  new_client.fake("endpointslices").add_list({feed_slice("xyz", {{"10.0.0.2", "p2"}}, "12")}, "12");
  (void)new_client.fake("endpointslices").add_watch();
  new_client.fake("pods").add_list({}, "22");
  (void)new_client.fake("pods").add_watch();
  testing::Gate release;
  testing::Gate stuck;
  TypedInformer<client::EndpointSlice>::Handler blocker;
  blocker.add = [&](const TypedInformer<client::EndpointSlice>::Ptr&, bool) {
    stuck.open();
    release.wait();
  };
  auto blocking = new_client.factory->informer<client::EndpointSlice>(list_options().endpoints)
                      .add_handler(std::move(blocker));
  EndpointFeed new_feed(index, "west", *new_client.factory, list_options());
  std::mutex mu;
  std::vector<std::size_t> sizes;  // west's endpoints in every snapshot from here on
  auto watch = index->watch(query(), [&](const EndpointSnapshotPtr& s) {
    const auto* part = s->cluster("west");
    std::lock_guard lock(mu);
    sizes.push_back(part ? part->endpoints.size() : 0);
  });
  new_client.factory->start();
  ASSERT_TRUE(new_client.factory->wait_for_cache_sync(testing::kDeadline));
  ASSERT_TRUE(stuck.wait());
  old_feed->close(false);
  EXPECT_EQ(new_feed.prune_stale(), 2u);  // xyz written, abc removed
  const auto* part = index->snapshot(query())->cluster("west");
  ASSERT_NE(part, nullptr);
  ASSERT_EQ(part->endpoints.size(), 1u);
  EXPECT_EQ(part->endpoints[0].address, "10.0.0.2");
  {
    std::lock_guard lock(mu);
    for (std::size_t n : sizes) EXPECT_GT(n, 0u) << ::testing::PrintToString(sizes);
  }
  release.open();
  blocking.close();
}

}  // namespace
}  // namespace kinformer::mesh
