#pragma once
#include <atomic>
#include <memory>

#include "fakes.h"
#include "kinformer/informer/informer_factory.h"

namespace kinformer::testing {

inline informer::InformerOptions selector_options(std::string labels, std::string fields = "") {
  informer::InformerOptions o;
  o.label_selector = std::move(labels);
  o.field_selector = std::move(fields);
  return o;
}
inline informer::InformerOptions watch_list_options() {
  informer::InformerOptions o;
  o.use_watch_list = true;
  return o;
}

/// The WatchList initial-events timeout in Env: waits this long or longer hold on the ManualClock
/// until the test advances it, so the timeout fires only when a test says so.
inline constexpr std::chrono::hours kEnvInitialEventsTimeout{1};

/// A factory over one scripted FakeListerWatcher and a ManualClock (holding waits of
/// kEnvInitialEventsTimeout or more); random fixed at 0.5. The WatchList initial-events limits
/// are held waits: idle kEnvInitialEventsTimeout, total 100 times that unless a test sets it.
struct Env {
  std::shared_ptr<FakeListerWatcher> fake = std::make_shared<FakeListerWatcher>();
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>(kEnvInitialEventsTimeout);
  std::atomic<int> lister_watchers_created{0};
  std::unique_ptr<informer::InformerFactory> factory;

  /// Scripts are LISTs unless a test asks for WatchList (watch_list_options()).
  explicit Env(informer::FactoryOptions o = {}) {
    o.use_watch_list = false;
    o.clock = clock;
    o.random = [] { return 0.5; };
    o.handler_stop_timeout = std::chrono::milliseconds(2000);
    o.reflector.watch_list_initial_events_timeout = kEnvInitialEventsTimeout;
    // The total limit too is held unless a test sets one of at least kEnvInitialEventsTimeout.
    if (o.reflector.watch_list_initial_events_deadline < kEnvInitialEventsTimeout) {
      o.reflector.watch_list_initial_events_deadline = 100 * kEnvInitialEventsTimeout;
    }
    factory = std::make_unique<informer::InformerFactory>(
        [this](const client::ResourceType&, const std::string&) {
          ++lister_watchers_created;
          return std::make_unique<ListerWatcherProxy>(fake);
        },
        std::move(o));
  }
  ~Env() { factory.reset(); }
};

}  // namespace kinformer::testing
