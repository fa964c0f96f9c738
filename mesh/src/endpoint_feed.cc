#include "kinformer/mesh/endpoint_feed.h"

#include <stdexcept>

#include "kinformer/client/endpoint_slice.h"
#include "kinformer/client/endpoints.h"
#include "kinformer/client/pod.h"

namespace kinformer::mesh {
namespace {

informer::HandlerOptions named(std::string name) {
  informer::HandlerOptions o;
  o.name = std::move(name);
  return o;
}

}  // namespace

EndpointFeed::EndpointFeed(EndpointIndexPtr index, std::string cluster,
                           informer::InformerFactory& factory, const EndpointFeedOptions& options)
    : index_(std::move(index)), cluster_(std::move(cluster)) {
  if (!index_) throw std::invalid_argument("EndpointFeed: the index is null");
  if (cluster_.empty()) throw std::invalid_argument("EndpointFeed: the cluster name is empty");
  if (!index_->set_source(cluster_, options.source)) {
    throw std::invalid_argument("EndpointFeed: cluster '" + cluster_ +
                                "' already feeds the index from the other endpoint source");
  }
  std::string name = options.name.empty() ? "endpoint-feed-" + cluster_ : options.name;
  epoch_ = options.epoch;
  source_ = options.source;
  // Every informer first (informer() may throw): the fence below is raised only by a feed that
  // will run.
  const bool slices = source_ == EndpointSource::slices;
  informer::SharedInformer& endpoints_informer =
      slices
          ? factory.informer(client::ResourceTraits<client::EndpointSlice>::type(),
                             options.endpoints)
          : factory.informer(client::ResourceTraits<client::Endpoints>::type(), options.endpoints);
  informer::SharedInformer& pods_informer =
      factory.informer(client::ResourceTraits<client::Pod>::type(), options.pods);
  endpoints_store_ = endpoints_informer.store_ptr();
  pods_store_ = pods_informer.store_ptr();
  // From here on nothing a feed of an older client of this cluster delivers lands.
  if (epoch_ != 0) index_->fence(cluster_, epoch_);
  // The cluster's parts say how fresh this feed's informers are (held weakly: a snapshot may
  // outlive the factory). A reader that ends up holding the last reference of an informer for
  // the call does so only after the factory is gone, which stopped it already: its destruction
  // there joins no thread.
  index_->set_freshness(
      cluster_, epoch_,
      [e = endpoints_informer.weak_from_this(), p = pods_informer.weak_from_this()] {
        auto ei = e.lock();
        auto pi = p.lock();
        if (!ei || !pi) return informer::Freshness{};
        return informer::stalest(ei->freshness(), pi->freshness());
      });

  // The handlers hold the index by shared_ptr and the cluster name and epoch by value: a
  // callback still running while the feed closes uses nothing of the feed.
  auto index_ptr = index_;
  const std::string c = cluster_;
  const std::uint64_t w = epoch_;
  if (slices) {
    using Ptr = informer::TypedInformer<client::EndpointSlice>::Ptr;
    informer::TypedInformer<client::EndpointSlice>::Handler h;
    h.add = [index_ptr, c, w](const Ptr& s, bool) { index_ptr->upsert_slice(c, s, w); };
    h.update = [index_ptr, c, w](const Ptr&, const Ptr& s) { index_ptr->upsert_slice(c, s, w); };
    h.del = [index_ptr, c, w](const Ptr& s, bool) { index_ptr->remove_slice(c, s->key(), w); };
    endpoints_ = informer::TypedInformer<client::EndpointSlice>(endpoints_informer)
                     .add_handler(std::move(h), named(name + "-slices"));
  } else {
    using Ptr = informer::TypedInformer<client::Endpoints>::Ptr;
    informer::TypedInformer<client::Endpoints>::Handler h;
    h.add = [index_ptr, c, w](const Ptr& e, bool) { index_ptr->upsert_endpoints(c, e, w); };
    h.update = [index_ptr, c, w](const Ptr&, const Ptr& e) {
      index_ptr->upsert_endpoints(c, e, w);
    };
    h.del = [index_ptr, c, w](const Ptr& e, bool) { index_ptr->remove_endpoints(c, e->key(), w); };
    endpoints_ = informer::TypedInformer<client::Endpoints>(endpoints_informer)
                     .add_handler(std::move(h), named(name + "-endpoints"));
  }
  using PodPtr = informer::TypedInformer<client::Pod>::Ptr;
  informer::TypedInformer<client::Pod>::Handler h;
  h.add = [index_ptr, c, w](const PodPtr& p, bool) { index_ptr->upsert_pod(c, p, w); };
  h.update = [index_ptr, c, w](const PodPtr&, const PodPtr& p) { index_ptr->upsert_pod(c, p, w); };
  h.del = [index_ptr, c, w](const PodPtr& p, bool) { index_ptr->remove_pod(c, p->key(), w); };
  pods_ = informer::TypedInformer<client::Pod>(pods_informer)
              .add_handler(std::move(h), named(name + "-pods"));
}

EndpointFeed::~EndpointFeed() { close(false); }

bool EndpointFeed::has_synced() const { return endpoints_.has_synced() && pods_.has_synced(); }

namespace {

// Makes the index hold what `store` holds for `key`, and checks the store again afterwards: a
// change that came in between (whose handler may have written it before this write) is
// written again. A change after the last check reaches the index through the handler, which
// hears of it only after the store has it. Bounded: under constant churn the handler converges.
template <typename T, typename Upsert, typename Remove>
void write_from_store(const std::string& key, const cache::Store& store, const Upsert& upsert,
                      const Remove& remove) {
  for (int round = 0; round < 8; ++round) {
    client::ObjectPtr now = store.get(key);
    if (now) {
      upsert(std::static_pointer_cast<const T>(now));
    } else {
      remove(key);
    }
    if (store.get(key) == now) return;
  }
}

// Makes the index's inputs of one kind equal to `store`. Additions and updates first, removals
// after: the shard moves from the old content to the new without an emptier state in between.
// `held`: what the index holds (key -> resourceVersion). Returns how many inputs it changed.
template <typename T, typename Upsert, typename Remove>
std::size_t converge_kind(const std::map<std::string, std::string>& held, const cache::Store& store,
                          const Upsert& upsert, const Remove& remove) {
  std::size_t changed = 0;
  for (const client::ObjectPtr& o : store.list()) {
    auto it = held.find(o->key());
    if (it != held.end() && it->second == o->metadata.resource_version) continue;
    ++changed;
    write_from_store<T>(o->key(), store, upsert, remove);
  }
  for (const auto& [key, resource_version] : held) {
    if (store.get(key)) continue;
    ++changed;
    write_from_store<T>(key, store, upsert, remove);
  }
  return changed;
}

}  // namespace

std::size_t EndpointFeed::prune_stale() {
  // A key missing from a synced store was deleted or was never this client's; a different
  // resourceVersion is content this client does not hold. The stores are the truth.
  EndpointIndex::ClusterKeys keys = index_->keys(cluster_);
  const std::string& c = cluster_;
  const std::uint64_t w = epoch_;
  std::size_t changed = source_ == EndpointSource::slices
                            ? converge_kind<client::EndpointSlice>(
                                  keys.slices, *endpoints_store_,
                                  [&](auto o) { index_->upsert_slice(c, std::move(o), w); },
                                  [&](const std::string& k) { index_->remove_slice(c, k, w); })
                            : converge_kind<client::Endpoints>(
                                  keys.endpoints, *endpoints_store_,
                                  [&](auto o) { index_->upsert_endpoints(c, std::move(o), w); },
                                  [&](const std::string& k) { index_->remove_endpoints(c, k, w); });
  changed += converge_kind<client::Pod>(
      keys.pods, *pods_store_, [&](auto o) { index_->upsert_pod(c, std::move(o), w); },
      [&](const std::string& k) { index_->remove_pod(c, k, w); });
  return changed;
}

void EndpointFeed::close(bool remove_cluster_from_index) {
  endpoints_.close();
  pods_.close();
  if (remove_cluster_from_index) index_->remove_cluster(cluster_, epoch_);
}

}  // namespace kinformer::mesh
