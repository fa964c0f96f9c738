// kwatch audit and kwatch cache, plus what every subcommand shares.

#include "commands.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>

#include "audit_report.h"
#include "cache_dump.h"
#include "kinformer/client/dynamic_object.h"
#include "kinformer/informer/informer_factory.h"

namespace kinformer::tools {

using namespace std::chrono_literals;

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

// Errors waiting will not fix.
bool permanent(const client::Error& e) {
  return e.code == client::Errc::api &&
         (e.http_status == 401 || e.http_status == 403 || e.http_status == 404);
}

bool write_output(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::lock_guard lock(stdout_mutex());
    std::cout << text;
    std::cout.flush();
    return true;
  }
  return write_dump_file(path, text);
}

std::string seconds_since(std::chrono::steady_clock::time_point start) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  std::ostringstream s;
  s.precision(1);
  s << std::fixed << static_cast<double>(ms.count()) / 1000.0 << "s";
  return s.str();
}

}  // namespace

int run_cache(const CacheOptions& options) {
  ResolvedResource resolved = resolve_resource(options.resource);
  const auto config = load_config(options.common);
  client::RestClientOptions client_options;
  client_options.user_agent = "kwatch/0.1 (kinformer/0.1)";
  client::RestClient client(config, client_options);

  if (resolved.needs_discovery) {
    auto& gvr = resolved.gvr;
    const std::string path =
        gvr.group.empty() ? "/api/" + gvr.version : "/apis/" + gvr.group + "/" + gvr.version;
    auto doc = client.get_raw(path);
    if (!doc) {
      log("error", describe_error(doc.error(), config.server), {{"resource", options.resource}});
      return kExitError;
    }
    if (doc->status == 404) {
      log("error", "unknown resource '" + options.resource +
                       "': the server has no API group version " + gvr.api_version());
      return kExitError;
    }
    if (doc->status != 200) {
      log("error",
          "discovery of " + gvr.api_version() + " failed: HTTP " + std::to_string(doc->status),
          {{"resource", options.resource}});
      return kExitError;
    }
    if (!apply_discovery(doc->body, gvr)) {
      log("error", "unknown resource '" + options.resource + "': " + gvr.api_version() +
                       " has no resource " + gvr.resource);
      return kExitError;
    }
    if (!gvr.namespaced && !options.namespace_.empty()) {
      log("error", gvr.to_string() + " is cluster-scoped: drop -n");
      return kExitError;
    }
  }
  const client::ResourceType type = client::dynamic_resource(resolved.gvr);
  const std::string resource = resolved.gvr.to_string();
  const DumpOptions dump_options{is_secret_resource(resolved.gvr), options.show_secret_data};
  const std::optional<std::string> dump_path =
      options.dump ? options.dump
                   : (options.events ? std::nullopt : std::optional<std::string>("-"));

  auto slot = std::make_shared<ErrorSlot>();
  informer::InformerFactory factory(
      [&client, slot](const client::ResourceType& t,
                      const std::string& ns) -> client::ListerWatcherPtr {
        return std::make_unique<RecordingListerWatcher>(client.lister_watcher(t, ns), slot);
      });
  informer::InformerOptions informer_options;
  informer_options.namespace_ = options.namespace_;
  informer_options.label_selector = options.label_selector;
  informer_options.field_selector = options.field_selector;
  informer::SharedInformer& inf = factory.informer(type, informer_options);

  informer::Registration events;
  if (options.events) {
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
    events = inf.add_handler(handler, {.name = "kwatch-events"});
  }

  auto dump = [&](const char* why) {
    if (!dump_path) return true;
    const auto objects = inf.store().list();
    if (!write_output(*dump_path, format_dump(objects, dump_options))) {
      log("error", "cannot write the dump", {{"file", *dump_path}});
      return false;
    }
    log("info", "dumped the cache",
        {{"why", why},
         {"objects", std::to_string(objects.size())},
         {"file", *dump_path == "-" ? "stdout" : *dump_path}});
    return true;
  };

  const std::string where = options.namespace_.empty() ? "all namespaces" : options.namespace_;
  log("info", "starting informer",
      {{"resource", resource},
       {"namespace", where},
       {"labelSelector", options.label_selector},
       {"fieldSelector", options.field_selector},
       {"server", config.server}});
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::seconds(options.timeout_seconds);
  const bool tty = isatty(STDERR_FILENO) == 1;
  factory.start();

  const sigset_t signals = kwatch_signals();
  bool synced = false;
  int exit_code = kExitOk;
  while (true) {
    timespec wait{0, 200'000'000};
    const int sig = sigtimedwait(&signals, nullptr, &wait);
    if (sig == SIGINT || sig == SIGTERM) {
      log("info", "stopping", {{"signal", sig == SIGINT ? "SIGINT" : "SIGTERM"}});
      break;
    }
    if (sig == SIGUSR1) {
      if (synced)
        dump("SIGUSR1");
      else
        log("warn", "SIGUSR1 before the cache synced: nothing to dump yet");
      continue;
    }
    if (synced) continue;
    if (inf.has_synced()) {
      synced = true;
      if (tty) std::cerr << "\r\x1b[K";
      log("info", "cache synced",
          {{"resource", resource},
           {"objects", std::to_string(inf.store().size())},
           {"resourceVersion", inf.last_sync_resource_version()},
           {"after", seconds_since(start)}});
      if (options.until_synced) break;
      continue;
    }
    const auto last_error = slot->get();
    if (last_error && permanent(*last_error)) {
      if (tty) std::cerr << "\r\x1b[K";
      log("error", "cannot sync " + resource + ": " + describe_error(*last_error, config.server));
      exit_code = kExitError;
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      if (tty) std::cerr << "\r\x1b[K";
      const std::string why =
          last_error ? ": last error: " + describe_error(*last_error, config.server) : "";
      log("error", "the " + resource + " cache did not sync within " +
                       std::to_string(options.timeout_seconds) + "s" + why);
      exit_code = kExitError;
      break;
    }
    if (tty) {
      std::lock_guard lock(stdout_mutex());
      std::cerr << "\r\x1b[Ksyncing " << resource << " (" << where << ") " << seconds_since(start)
                << (last_error ? " retrying after: " + last_error->to_string().substr(0, 100)
                               : std::string())
                << std::flush;
    }
  }
  if (synced && !dump("exit")) exit_code = kExitError;
  events.close();
  factory.shutdown();
  return exit_code;
}

}  // namespace kinformer::tools
