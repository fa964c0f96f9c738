// kwatch audit and kwatch cache, plus what every subcommand shares.
// run_cache, at the end, reads as its steps: prepare_cache (setup), serve_cache (the loop, each
// poll before the sync a poll_initial_sync), dump_cache (the formatting is cache_dump's).

#include "commands.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>

#include "audit_report.h"
#include "cache_dump.h"
#include "kinformer/client/dynamic_object.h"
#include "kinformer/informer/informer_factory.h"

namespace kinformer::tools {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

client::ClusterConfig load_config(const CommonOptions& common) {
  client::KubeconfigOptions options;
  options.path = common.kubeconfig;
  options.context = common.context;
  return client::ClusterConfig::from_kubeconfig(options);
}

sigset_t kwatch_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);
  return set;
}

void block_kwatch_signals() {
  const sigset_t set = kwatch_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

std::mutex& stdout_mutex() {
  static std::mutex mu;
  return mu;
}

// ---------------------------------------------------------------------------------------------
// audit

int run_audit(const AuditOptions& options) {
  const auto config = load_config(options.common);
  client::RestClientOptions client_options;
  client_options.user_agent = "kwatch/0.1 (kinformer/0.1)";
  client::RestClient client(config, client_options);
  const auto response = client.get_raw("/metrics");
  return run_audit_on(response, options, config.server, std::cout, std::cerr);
}

// ---------------------------------------------------------------------------------------------
// cache

namespace {

// The last list/watch error of the informer's reflector: the informer does not expose one, so
// kwatch wraps the lister-watcher it hands to the factory.
class ErrorSlot {
 public:
  void set(const client::Error& e) {
    std::lock_guard lock(mu_);
    last_ = e;
  }
  void clear() {
    std::lock_guard lock(mu_);
    last_.reset();
  }
  std::optional<client::Error> get() const {
    std::lock_guard lock(mu_);
    return last_;
  }

 private:
  mutable std::mutex mu_;
  std::optional<client::Error> last_;  // guarded by mu_
};

class RecordingListerWatcher final : public client::ListerWatcher {
 public:
  RecordingListerWatcher(client::ListerWatcherPtr inner, std::shared_ptr<ErrorSlot> slot)
      : inner_(std::move(inner)), slot_(std::move(slot)) {}

  client::Result<client::ObjectList> list(const client::ListOptions& options) override {
    auto r = inner_->list(options);
    if (r)
      slot_->clear();
    else
      slot_->set(r.error());
    return r;
  }
  client::Result<client::WatchStreamPtr> watch(const client::ListOptions& options) override {
    auto r = inner_->watch(options);
    if (!r) slot_->set(r.error());
    return r;
  }

 private:
  client::ListerWatcherPtr inner_;
  std::shared_ptr<ErrorSlot> slot_;
};

bool write_output(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::lock_guard lock(stdout_mutex());
    std::cout << text;
    std::cout.flush();
    return true;
  }
  return write_dump_file(path, text);
}

std::string seconds_since(Clock::time_point start) {
  return format_seconds(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start));
}

// One kwatch cache run: the resolved resource, its informer, and where the output goes. Members
// go bottom-up: the --events registration closes before the factory, the factory before the
// client it lists and watches through.
struct CacheRun {
  CacheOptions options;
  client::ClusterConfig config;
  std::unique_ptr<client::RestClient> client;
  std::string resource;  // gvr.to_string(): "secrets", "apps/v1/deployments"
  std::string where;     // "all namespaces" or -n
  DumpOptions dump_options;
  std::optional<std::string> dump_path;   // dump_target(): nullopt = no dump
  std::shared_ptr<ErrorSlot> last_error;  // the reflector's last list/watch error
  std::unique_ptr<informer::InformerFactory> factory;
  informer::SharedInformer* informer = nullptr;  // factory's, on the resource and selectors
  informer::Registration events;                 // the --events printer, if any
};

// ---------------------------------------------------------------------------------------------
// Setup

// Discovery for a group/version/resource: fills gvr's kind and scope from the server; false
// after logging why the resource cannot be watched (unknown, or -n on a cluster-scoped one).
bool discover(client::RestClient& client, const std::string& server, const CacheOptions& options,
              client::GroupVersionResource& gvr) {
  const std::string path =
      gvr.group.empty() ? "/api/" + gvr.version : "/apis/" + gvr.group + "/" + gvr.version;
  auto doc = client.get_raw(path);
  if (!doc) {
    log("error", describe_error(doc.error(), server), {{"resource", options.resource}});
    return false;
  }
  if (doc->status == 404) {
    log("error", "unknown resource '" + options.resource +
                     "': the server has no API group version " + gvr.api_version());
    return false;
  }
  if (doc->status != 200) {
    log("error",
        "discovery of " + gvr.api_version() + " failed: HTTP " + std::to_string(doc->status),
        {{"resource", options.resource}});
    return false;
  }
  if (!apply_discovery(doc->body, gvr)) {
    log("error", "unknown resource '" + options.resource + "': " + gvr.api_version() +
                     " has no resource " + gvr.resource);
    return false;
  }
  if (!gvr.namespaced && !options.namespace_.empty()) {
    log("error", gvr.to_string() + " is cluster-scoped: drop -n");
    return false;
  }
  return true;
}

// --events: a handler printing each event to stdout as a format_event() line.
informer::Registration add_event_printer(informer::SharedInformer& inf) {
  auto print = [](std::string line) {
    std::lock_guard lock(stdout_mutex());
    std::cout << line << '\n';
    std::cout.flush();
  };
  auto handler = std::make_shared<informer::ResourceEventHandlerFuncs>();
  handler->add = [print](const client::ObjectPtr& o, bool) { print(format_event("ADDED", *o)); };
  handler->update = [print](const client::ObjectPtr&, const client::ObjectPtr& n) {
    print(format_event("MODIFIED", *n));
  };
  handler->del = [print](const client::ObjectPtr& o, bool unknown) {
    print(format_event("DELETED", *o, unknown));
  };
  return inf.add_handler(handler, {.name = "kwatch-events"});
}

// Setup: the resource (with discovery when needed), the client, the informer (its lister-watcher
// recording the last error) and the --events printer; nullptr after logging why not.
std::unique_ptr<CacheRun> prepare_cache(const CacheOptions& options) {
  ResolvedResource resolved = resolve_resource(options.resource);
  auto run = std::make_unique<CacheRun>();
  run->options = options;
  run->config = load_config(options.common);
  client::RestClientOptions client_options;
  client_options.user_agent = "kwatch/0.1 (kinformer/0.1)";
  run->client = std::make_unique<client::RestClient>(run->config, client_options);
  if (resolved.needs_discovery &&
      !discover(*run->client, run->config.server, options, resolved.gvr)) {
    return nullptr;
  }
  const client::ResourceType type = client::dynamic_resource(resolved.gvr);
  run->resource = resolved.gvr.to_string();
  run->where = options.namespace_.empty() ? "all namespaces" : options.namespace_;
  run->dump_options = {is_secret_resource(resolved.gvr), options.show_secret_data};
  run->dump_path = dump_target(options.dump, options.events);

  run->last_error = std::make_shared<ErrorSlot>();
  informer::FactoryOptions factory_options;
  if (options.watch_idle_timeout_seconds) {
    factory_options.reflector.watch_idle_timeout =
        std::chrono::seconds(*options.watch_idle_timeout_seconds);
  }
  run->factory = std::make_unique<informer::InformerFactory>(
      [client = run->client.get(), slot = run->last_error](
          const client::ResourceType& t, const std::string& ns) -> client::ListerWatcherPtr {
        return std::make_unique<RecordingListerWatcher>(client->lister_watcher(t, ns), slot);
      },
      factory_options);
  informer::InformerOptions informer_options;
  informer_options.namespace_ = options.namespace_;
  informer_options.label_selector = options.label_selector;
  informer_options.field_selector = options.field_selector;
  run->informer = &run->factory->informer(type, informer_options);
  if (options.events) run->events = add_event_printer(*run->informer);
  return run;
}

// ---------------------------------------------------------------------------------------------
// Rendering (the formatting is cache_dump's)

// Writes the cache to the dump target (if any) and logs it; false when the write failed.
bool dump_cache(const CacheRun& run, const char* why) {
  if (!run.dump_path) return true;
  const auto objects = run.informer->store().list();
  if (!write_output(*run.dump_path, format_dump(objects, run.dump_options))) {
    log("error", "cannot write the dump", {{"file", *run.dump_path}});
    return false;
  }
  log("info", "dumped the cache",
      {{"why", why},
       {"objects", std::to_string(objects.size())},
       {"file", *run.dump_path == "-" ? "stdout" : *run.dump_path}});
  return true;
}

// ---------------------------------------------------------------------------------------------
// The loop

// How the loop ended: whether the cache synced, and the exit status so far.
struct CacheLoopResult {
  bool synced = false;
  int exit_code = kExitOk;
};

// One poll after the initial sync: a line when the cache turns stale (nothing from the server
// past the idle deadline) and one when it is fresh again. `stale` is the state last logged.
void poll_freshness(const CacheRun& run, bool& stale) {
  const informer::Freshness f = run.informer->freshness();
  const FreshnessChange change = freshness_change(f, stale);
  if (change == FreshnessChange::none) return;
  const auto age = std::chrono::duration_cast<std::chrono::milliseconds>(f.age);
  if (change == FreshnessChange::stale) {
    log("warn", "cache stale: nothing from the server within the idle deadline",
        {{"resource", run.resource},
         {"age", format_seconds(age)},
         {"staleAfter", format_seconds(f.stale_after)},
         {"resourceVersion", f.resource_version}});
  } else {
    log("info", "cache fresh again",
        {{"resource", run.resource}, {"resourceVersion", f.resource_version}});
  }
}

// One poll before the initial sync, as sync_state() decides: draws the progress line on a
// terminal, or logs the sync, or the permanent error or timeout (exit 2). True when the loop ends.
bool poll_initial_sync(const CacheRun& run, Clock::time_point start, Clock::time_point deadline,
                       bool tty, CacheLoopResult& result) {
  const bool has_synced = run.informer->has_synced();
  const auto last_error = run.last_error->get();
  const SyncState state = sync_state(has_synced, last_error, Clock::now() >= deadline);
  if (state == SyncState::syncing) {
    if (tty) {
      const auto elapsed =
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
      std::lock_guard lock(stdout_mutex());
      std::cerr << format_sync_progress(run.resource, run.where, elapsed, last_error) << std::flush;
    }
    return false;
  }
  if (tty) std::cerr << "\r\x1b[K";  // the progress line gives way to the log line
  if (state == SyncState::synced) {
    result.synced = true;
    log("info", "cache synced",
        {{"resource", run.resource},
         {"objects", std::to_string(run.informer->store().size())},
         {"resourceVersion", run.informer->last_sync_resource_version()},
         {"after", seconds_since(start)}});
    return run.options.until_synced;
  }
  if (state == SyncState::failed) {
    log("error",
        "cannot sync " + run.resource + ": " + describe_error(*last_error, run.config.server));
  } else {  // SyncState::timed_out
    const std::string why =
        last_error ? ": last error: " + describe_error(*last_error, run.config.server) : "";
    log("error", "the " + run.resource + " cache did not sync within " +
                     std::to_string(run.options.timeout_seconds) + "s" + why);
  }
  result.exit_code = kExitError;
  return true;
}

// The loop: starts the informer, then every 200 ms (or on a signal) until SIGINT/SIGTERM, the
// sync with --until-synced, or a failed or timed-out initial sync; SIGUSR1 dumps once synced.
// Once synced, each poll says when the cache turns stale and when it is fresh again.
CacheLoopResult serve_cache(CacheRun& run) {
  log("info", "starting informer",
      {{"resource", run.resource},
       {"namespace", run.where},
       {"labelSelector", run.options.label_selector},
       {"fieldSelector", run.options.field_selector},
       {"server", run.config.server}});
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::seconds(run.options.timeout_seconds);
  const bool tty = isatty(STDERR_FILENO) == 1;
  run.factory->start();

  const sigset_t signals = kwatch_signals();
  CacheLoopResult result;
  bool stale = false;
  while (true) {
    timespec wait{0, 200'000'000};
    const int sig = sigtimedwait(&signals, nullptr, &wait);
    if (sig == SIGINT || sig == SIGTERM) {
      log("info", "stopping", {{"signal", sig == SIGINT ? "SIGINT" : "SIGTERM"}});
      return result;
    }
    if (sig == SIGUSR1) {
      if (result.synced) {
        dump_cache(run, "SIGUSR1");
      } else {
        log("warn", "SIGUSR1 before the cache synced: nothing to dump yet");
      }
      continue;
    }
    if (result.synced) {
      poll_freshness(run, stale);
    } else if (poll_initial_sync(run, start, deadline, tty, result)) {
      return result;
    }
  }
}

}  // namespace

// Setup, the loop, the dump at exit (when synced), shutdown.
int run_cache(const CacheOptions& options) {
  const auto run = prepare_cache(options);
  if (!run) return kExitError;
  const CacheLoopResult loop = serve_cache(*run);
  int exit_code = loop.exit_code;
  if (loop.synced && !dump_cache(*run, "exit")) exit_code = kExitError;
  run->events.close();
  run->factory->shutdown();
  return exit_code;
}

}  // namespace kinformer::tools
