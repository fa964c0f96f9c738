#include "kinformer/controller/controller.h"

#include <atomic>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>

#include "kinformer/client/error.h"
#include "kinformer/informer/event_handler.h"
#include "kinformer/informer/registration.h"

namespace kinformer::controller {
namespace detail {
namespace {

void validate(const ControllerOptions& o) {
  auto bad = [](const std::string& what) {
    throw client::ConfigError("ControllerOptions: " + what);
  };
  if (o.name.empty()) bad("name is empty");
  if (!o.reconcile) bad("reconcile is null");
  if (o.workers < 1) bad("workers must be at least 1");
  if (o.sync_poll_period <= std::chrono::milliseconds::zero()) {
    bad("sync_poll_period must be positive");
  }
  if (o.metrics_period <= std::chrono::milliseconds::zero()) {
    bad("metrics_period must be positive");
  }
}

WorkQueueOptions queue_options(ControllerOptions& o, const informer::ClockPtr& clock) {
  WorkQueueOptions q;
  q.name = o.name;
  q.clock = clock;
  q.rate_limiter = std::move(o.rate_limiter);
  q.registry = std::move(o.registry);
  return q;
}

}  // namespace

class ControllerState {
 public:
  explicit ControllerState(ControllerOptions o)
      : clock_(o.clock ? o.clock : informer::system_clock()),
        queue_(queue_options(o, clock_)),
        reconcile_(std::move(o.reconcile)),
        workers_(o.workers),
        sync_poll_period_(o.sync_poll_period),
        metrics_period_(o.metrics_period),
        log_(std::move(o.log), "controller", {{"controller", o.name}}) {}

  void watch(informer::SharedInformer& informer, KeyFunc keys) {
    std::lock_guard lock(mu_);
    if (ran_) throw std::logic_error("Controller::watch: called after run()");
    auto handler = std::make_shared<informer::ResourceEventHandlerFuncs>();
    auto enqueue = [this, keys = std::move(keys)](const client::ObjectPtr& object) {
      if (!object) return;
      if (!keys) {
        queue_.add(object->key());
        return;
      }
      for (const auto& key : keys(*object)) queue_.add(key);
    };
    handler->add = [enqueue](const client::ObjectPtr& o, bool) { enqueue(o); };
    handler->update = [enqueue](const client::ObjectPtr&, const client::ObjectPtr& n) {
      enqueue(n);
    };
    // A tombstone (final state unknown) is the last object the cache knew: its key is the key.
    handler->del = [enqueue](const client::ObjectPtr& o, bool) { enqueue(o); };
    auto registration =
        std::make_shared<informer::Registration>(informer.add_handler(handler, {queue_.name()}));
    synced_.emplace_back([weak = std::weak_ptr<informer::Registration>(registration)] {
      auto r = weak.lock();
      return r && r->has_synced();
    });
    registrations_.push_back(std::move(registration));
  }

  void wait_for(std::function<bool()> has_synced) {
    std::lock_guard lock(mu_);
    if (ran_) throw std::logic_error("Controller::wait_for: called after run()");
    if (has_synced) synced_.push_back(std::move(has_synced));
  }

  void claim_run() {
    std::lock_guard lock(mu_);
    if (ran_) throw std::logic_error("Controller::run: called twice");
    ran_ = true;
  }

  void run(const std::stop_token& stop) {
    if (wait_for_caches(stop)) {
      log_.info("caches synced: starting workers", {{"workers", std::to_string(workers_)}});
      std::vector<std::jthread> workers;
      workers.reserve(static_cast<std::size_t>(workers_));
      started_ = true;
      for (int i = 0; i < workers_; ++i) workers.emplace_back([this] { work(); });
      while (clock_->sleep_for(metrics_period_, stop)) queue_.update_metrics();
      log_.info("stopping: draining the running reconciles");
      queue_.shut_down_with_drain();
      workers.clear();  // joins
    } else {
      queue_.shut_down();
    }
    std::vector<std::shared_ptr<informer::Registration>> registrations;
    {
      std::lock_guard lock(mu_);
      registrations.swap(registrations_);
      synced_.clear();
    }
    registrations.clear();  // closes the handlers
    log_.info("stopped");
  }

  void start() {
    claim_run();
    std::lock_guard lock(thread_mu_);
    thread_ = std::jthread([this](const std::stop_token& stop) { run(stop); });
  }

  void stop() {
    std::lock_guard lock(thread_mu_);
    if (thread_.joinable()) {
      thread_.request_stop();
      thread_.join();
    }
  }

  [[nodiscard]] bool workers_started() const { return started_.load(); }
  WorkQueue& queue() { return queue_; }

 private:
  // Polls every sync condition until all hold (true) or stop is requested (false).
  bool wait_for_caches(const std::stop_token& stop) {
    std::vector<std::function<bool()>> synced;
    {
      std::lock_guard lock(mu_);
      synced = synced_;
    }
    log_.info("waiting for caches to sync");
    while (true) {
      bool all = true;
      for (const auto& s : synced) all = all && s();
      if (all) return true;
      if (!clock_->sleep_for(sync_poll_period_, stop)) return false;
    }
  }

  void work() {
    while (auto key = queue_.get()) {
      std::string error;
      try {
        if (auto s = reconcile_(*key); !s) error = s.error().to_string();
      } catch (const std::exception& e) {
        error = std::string("exception: ") + e.what();
      } catch (...) {
        error = "exception: unknown";
      }
      if (error.empty()) {
        queue_.forget(*key);
      } else {
        log_.warn("reconcile failed: retrying",
                  {{"key", *key},
                   {"error", error},
                   {"retries", std::to_string(queue_.num_requeues(*key))}});
        queue_.add_rate_limited(*key);
      }
      queue_.done(*key);
    }
  }

  const informer::ClockPtr clock_;
  WorkQueue queue_;
  const Reconciler reconcile_;
  const int workers_;
  const std::chrono::milliseconds sync_poll_period_;
  const std::chrono::milliseconds metrics_period_;
  const client::Logger log_;

  std::mutex mu_;
  bool ran_ = false;                                                    // guarded by mu_
  std::vector<std::function<bool()>> synced_;                           // guarded by mu_
  std::vector<std::shared_ptr<informer::Registration>> registrations_;  // guarded by mu_
  std::atomic<bool> started_{false};

  std::mutex thread_mu_;
  std::jthread thread_;  // guarded by thread_mu_
};

}  // namespace detail

Controller::Controller(ControllerOptions options) : name_(options.name) {
  detail::validate(options);
  state_ = std::make_unique<detail::ControllerState>(std::move(options));
}

Controller::~Controller() { stop(); }

void Controller::watch(informer::SharedInformer& informer, KeyFunc keys) {
  state_->watch(informer, std::move(keys));
}
void Controller::wait_for(std::function<bool()> has_synced) {
  state_->wait_for(std::move(has_synced));
}
void Controller::run(const std::stop_token& stop) {
  state_->claim_run();
  state_->run(stop);
}
void Controller::start() { state_->start(); }
void Controller::stop() { state_->stop(); }
bool Controller::workers_started() const { return state_->workers_started(); }
WorkQueue& Controller::queue() { return state_->queue(); }

}  // namespace kinformer::controller
