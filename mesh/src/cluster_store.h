#pragma once
// ClusterStore: the remote clusters as subscribers know them, and the subscribers. The
// registry's worker publishes each change here, in order; a new subscriber is first told what
// exists (added, and synced where the current client synced), then every later change.

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kinformer/client/log.h"
#include "remote_cluster_life.h"

namespace kinformer::mesh {

/// One subscriber: its handler, and whether a call of it runs (close() waits for that).
struct ClusterSubscription::State final : informer::Closable {
  explicit State(ClusterHandler h) : handler(std::move(h)) {}
  /// Runs one call unless closed; returns what an exception said ("" when none): a component's
  /// exception must not stop the registry.
  std::string call(const std::function<void(const ClusterHandler&)>& fn);
  /// No call starts after it; waits for a running one unless called from inside it.
  bool close() override;
  [[nodiscard]] bool active() const override;

  const ClusterHandler handler;
  mutable std::mutex mu;
  std::condition_variable cv;
  bool closed = false;     // guarded by mu
  bool running = false;    // guarded by mu
  std::thread::id runner;  // guarded by mu
};

namespace detail {

/// Thread-safe. publish() and replay() are called by one thread (the registry's worker), which
/// keeps every subscriber's calls in order; subscribe() from any thread.
class ClusterStore {
 public:
  explicit ClusterStore(client::Logger log);

  /// A new subscriber; it hears nothing until the next replay().
  ClusterSubscription subscribe(ClusterHandler handler);
  /// Tells the subscribers that joined since the last call what exists now: `added` for each
  /// cluster, then `synced` for each whose current client has synced.
  void replay();
  /// Records `event` and tells it to every subscriber already replayed.
  void publish(const ClusterEvent& event);
  /// Drops every subscriber (the registry shut down): nothing more is told, and a later
  /// subscribe() returns a closed subscription.
  void clear();

 private:
  struct Known {
    RemoteClusterPtr cluster;
    bool synced = false;  // `synced` was published for this client
  };
  struct Subscriber {
    std::shared_ptr<ClusterSubscription::State> state;
    bool replayed = false;
  };
  void report(const std::string& thrown) const;
  void drop_closed();  // mu_ held

  const client::Logger log_;
  std::mutex mu_;
  std::map<std::string, Known> known_;   // guarded by mu_
  std::vector<Subscriber> subscribers_;  // guarded by mu_
  bool cleared_ = false;                 // guarded by mu_: the registry shut down
};

}  // namespace detail
}  // namespace kinformer::mesh
