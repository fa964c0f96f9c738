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
  // From here on this feed is the cluster's only writer: whatever an earlier feed of the cluster
  // (the old client of a switch) still delivers is dropped by the index.
  writer_ = index_->claim(cluster_);
  // The handlers hold the index by shared_ptr and the cluster name and writer by value: a
  // callback still running while the feed closes uses nothing of the feed.
  auto index_ptr = index_;
  const std::string c = cluster_;
  const std::uint64_t w = writer_;
  if (options.source == EndpointSource::slices) {
    auto informer = factory.informer<client::EndpointSlice>(options.endpoints);
    endpoints_store_ =
        factory.informer(client::ResourceTraits<client::EndpointSlice>::type(), options.endpoints)
            .store_ptr();
    using Ptr = informer::TypedInformer<client::EndpointSlice>::Ptr;
    informer::TypedInformer<client::EndpointSlice>::Handler h;
    h.add = [index_ptr, c, w](const Ptr& s, bool) { index_ptr->upsert_slice(c, s, w); };
    h.update = [index_ptr, c, w](const Ptr&, const Ptr& s) { index_ptr->upsert_slice(c, s, w); };
    h.del = [index_ptr, c, w](const Ptr& s, bool) { index_ptr->remove_slice(c, s->key(), w); };
    endpoints_ = informer.add_handler(std::move(h), named(name + "-slices"));
  } else {
    auto informer = factory.informer<client::Endpoints>(options.endpoints);
    endpoints_store_ =
        factory.informer(client::ResourceTraits<client::Endpoints>::type(), options.endpoints)
            .store_ptr();
    using Ptr = informer::TypedInformer<client::Endpoints>::Ptr;
    informer::TypedInformer<client::Endpoints>::Handler h;
    h.add = [index_ptr, c, w](const Ptr& e, bool) { index_ptr->upsert_endpoints(c, e, w); };
    h.update = [index_ptr, c, w](const Ptr&, const Ptr& e) {
      index_ptr->upsert_endpoints(c, e, w);
    };
    h.del = [index_ptr, c, w](const Ptr& e, bool) { index_ptr->remove_endpoints(c, e->key(), w); };
    endpoints_ = informer.add_handler(std::move(h), named(name + "-endpoints"));
  }
  auto pods = factory.informer<client::Pod>(options.pods);
  pods_store_ =
      factory.informer(client::ResourceTraits<client::Pod>::type(), options.pods).store_ptr();
  using PodPtr = informer::TypedInformer<client::Pod>::Ptr;
  informer::TypedInformer<client::Pod>::Handler h;
  h.add = [index_ptr, c, w](const PodPtr& p, bool) { index_ptr->upsert_pod(c, p, w); };
  h.update = [index_ptr, c, w](const PodPtr&, const PodPtr& p) { index_ptr->upsert_pod(c, p, w); };
  h.del = [index_ptr, c, w](const PodPtr& p, bool) { index_ptr->remove_pod(c, p->key(), w); };
  pods_ = pods.add_handler(std::move(h), named(name + "-pods"));
}

EndpointFeed::~EndpointFeed() { close(false); }

bool EndpointFeed::has_synced() const { return endpoints_.has_synced() && pods_.has_synced(); }

namespace {

// Makes the index's inputs of one kind equal to `store`: an input the store does not hold is
// removed, one it holds at another resourceVersion is written again from the store. `held` is
// what the index holds (key -> resourceVersion). Returns how many inputs it changed.
template <typename T, typename Upsert, typename Remove>
std::size_t converge_kind(const std::map<std::string, std::string>& held, const cache::Store& store,
                          const Upsert& upsert, const Remove& remove) {
  std::size_t changed = 0;
  for (const auto& [key, resource_version] : held) {
    client::ObjectPtr now = store.get(key);
    if (now && now->metadata.resource_version == resource_version) continue;
    ++changed;
    if (now) {
      upsert(std::static_pointer_cast<const T>(now));
      continue;
    }
    remove(key);
    // The store changes before its handlers hear of it; an object that arrived between the
    // look-up and the removal (its handler may have written it first) is put back.
    if (auto back = store.get(key)) upsert(std::static_pointer_cast<const T>(back));
  }
  return changed;
}

}  // namespace

std::size_t EndpointFeed::prune_stale() {
  // A missing key in a synced store was deleted or was never this client's; a different
  // resourceVersion is content this client does not hold (a write the fence came too late for
  // cannot exist, but the stores are the truth either way).
  EndpointIndex::ClusterKeys keys = index_->keys(cluster_);
  const std::string& c = cluster_;
  const std::uint64_t w = writer_;
  std::size_t changed = converge_kind<client::EndpointSlice>(
      keys.slices, *endpoints_store_, [&](auto o) { index_->upsert_slice(c, std::move(o), w); },
      [&](const std::string& k) { index_->remove_slice(c, k, w); });
  changed += converge_kind<client::Endpoints>(
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
  if (remove_cluster_from_index) index_->remove_cluster(cluster_, writer_);
}

}  // namespace kinformer::mesh
