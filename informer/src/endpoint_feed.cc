#include "kinformer/informer/endpoint_feed.h"

#include <stdexcept>

#include "kinformer/client/endpoint_slice.h"
#include "kinformer/client/endpoints.h"
#include "kinformer/client/pod.h"

namespace kinformer::informer {
namespace {

HandlerOptions named(std::string name) {
  HandlerOptions o;
  o.name = std::move(name);
  return o;
}

}  // namespace

EndpointFeed::EndpointFeed(cache::EndpointIndexPtr index, std::string cluster,
                           InformerFactory& factory, const EndpointFeedOptions& options)
    : index_(std::move(index)), cluster_(std::move(cluster)) {
  if (!index_) throw std::invalid_argument("EndpointFeed: the index is null");
  if (cluster_.empty()) throw std::invalid_argument("EndpointFeed: the cluster name is empty");
  if (!index_->set_source(cluster_, options.source)) {
    throw std::invalid_argument("EndpointFeed: cluster '" + cluster_ +
                                "' already feeds the index from the other endpoint source");
  }
  std::string name = options.name.empty() ? "endpoint-feed-" + cluster_ : options.name;
  // The handlers hold the index by shared_ptr and the cluster name by value: a callback still
  // running while the feed closes uses nothing of the feed.
  auto index_ptr = index_;
  const std::string c = cluster_;
  if (options.source == cache::EndpointSource::slices) {
    auto informer = factory.informer<client::EndpointSlice>(options.endpoints);
    endpoints_store_ =
        factory.informer(client::ResourceTraits<client::EndpointSlice>::type(), options.endpoints)
            .store_ptr();
    using Ptr = TypedInformer<client::EndpointSlice>::Ptr;
    TypedInformer<client::EndpointSlice>::Handler h;
    h.add = [index_ptr, c](const Ptr& s, bool) { index_ptr->upsert_slice(c, s); };
    h.update = [index_ptr, c](const Ptr&, const Ptr& s) { index_ptr->upsert_slice(c, s); };
    h.del = [index_ptr, c](const Ptr& s, bool) { index_ptr->remove_slice(c, s->key()); };
    endpoints_ = informer.add_handler(std::move(h), named(name + "-slices"));
  } else {
    auto informer = factory.informer<client::Endpoints>(options.endpoints);
    endpoints_store_ =
        factory.informer(client::ResourceTraits<client::Endpoints>::type(), options.endpoints)
            .store_ptr();
    using Ptr = TypedInformer<client::Endpoints>::Ptr;
    TypedInformer<client::Endpoints>::Handler h;
    h.add = [index_ptr, c](const Ptr& e, bool) { index_ptr->upsert_endpoints(c, e); };
    h.update = [index_ptr, c](const Ptr&, const Ptr& e) { index_ptr->upsert_endpoints(c, e); };
    h.del = [index_ptr, c](const Ptr& e, bool) { index_ptr->remove_endpoints(c, e->key()); };
    endpoints_ = informer.add_handler(std::move(h), named(name + "-endpoints"));
  }
  auto pods = factory.informer<client::Pod>(options.pods);
  pods_store_ =
      factory.informer(client::ResourceTraits<client::Pod>::type(), options.pods).store_ptr();
  using PodPtr = TypedInformer<client::Pod>::Ptr;
  TypedInformer<client::Pod>::Handler h;
  h.add = [index_ptr, c](const PodPtr& p, bool) { index_ptr->upsert_pod(c, p); };
  h.update = [index_ptr, c](const PodPtr&, const PodPtr& p) { index_ptr->upsert_pod(c, p); };
  h.del = [index_ptr, c](const PodPtr& p, bool) { index_ptr->remove_pod(c, p->key()); };
  pods_ = pods.add_handler(std::move(h), named(name + "-pods"));
}

EndpointFeed::~EndpointFeed() { close(false); }

bool EndpointFeed::has_synced() const { return endpoints_.has_synced() && pods_.has_synced(); }

std::size_t EndpointFeed::prune_stale() {
  // The store changes before its handlers hear of it, so a key missing from a synced store was
  // deleted or was never this client's. One race is left: the key arrives between the check and
  // the removal (its handler may upsert before the removal lands); checking the store again
  // afterwards and putting the object back closes it.
  cache::EndpointIndex::ClusterKeys keys = index_->keys(cluster_);
  std::size_t removed = 0;
  for (const auto& k : keys.slices) {
    if (endpoints_store_->get(k)) continue;
    index_->remove_slice(cluster_, k);
    ++removed;
    if (auto back = endpoints_store_->get(k)) {
      index_->upsert_slice(cluster_, std::static_pointer_cast<const client::EndpointSlice>(back));
    }
  }
  for (const auto& k : keys.endpoints) {
    if (endpoints_store_->get(k)) continue;
    index_->remove_endpoints(cluster_, k);
    ++removed;
    if (auto back = endpoints_store_->get(k)) {
      index_->upsert_endpoints(cluster_, std::static_pointer_cast<const client::Endpoints>(back));
    }
  }
  for (const auto& k : keys.pods) {
    if (pods_store_->get(k)) continue;
    index_->remove_pod(cluster_, k);
    ++removed;
    if (auto back = pods_store_->get(k)) {
      index_->upsert_pod(cluster_, std::static_pointer_cast<const client::Pod>(back));
    }
  }
  return removed;
}

void EndpointFeed::close(bool remove_cluster_from_index) {
  endpoints_.close();
  pods_.close();
  if (remove_cluster_from_index) index_->remove_cluster(cluster_);
}

}  // namespace kinformer::informer
