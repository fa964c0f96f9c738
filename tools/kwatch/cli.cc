#include "cli.h"

#include <charconv>
#include <iostream>
#include <mutex>

namespace kinformer::tools {
namespace {

// Walks the arguments of one subcommand.
class Args {
 public:
  Args(const std::vector<std::string>& args, std::string command)
      : args_(args), command_(std::move(command)) {}

  bool next(std::string& flag) {
    if (i_ >= args_.size()) return false;
    flag = args_[i_++];
    // --flag=value is the same as --flag value.
    if (flag.rfind("--", 0) == 0) {
      if (auto eq = flag.find('='); eq != std::string::npos) {
        inline_value_ = flag.substr(eq + 1);
        flag.resize(eq);
      }
    }
    return true;
  }

  std::string value(const std::string& flag) {
    if (inline_value_) {
      std::string v = std::move(*inline_value_);
      inline_value_.reset();
      return v;
    }
    if (i_ >= args_.size()) throw UsageError(command_ + ": " + flag + " needs a value");
    return args_[i_++];
  }

  long number(const std::string& flag, long min, long max) {
    const std::string v = value(flag);
    long n = 0;
    auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc() || ptr != v.data() + v.size() || v.empty())
      throw UsageError(command_ + ": " + flag + " expects a whole number, got '" + v + "'");
    if (n < min || n > max)
      throw UsageError(command_ + ": " + flag + " must be between " + std::to_string(min) +
                       " and " + std::to_string(max) + ", got " + v);
    return n;
  }

  void no_value(const std::string& flag) {
    if (inline_value_) throw UsageError(command_ + ": " + flag + " takes no value");
  }

  [[noreturn]] void unknown(const std::string& flag) {
    if (flag.rfind("-", 0) == 0) throw UsageError(command_ + ": unknown flag " + flag);
    throw UsageError(command_ + ": unexpected argument '" + flag + "'");
  }

 private:
  const std::vector<std::string>& args_;
  std::string command_;
  std::size_t i_ = 0;
  std::optional<std::string> inline_value_;
};

bool common_flag(Args& a, const std::string& flag, CommonOptions& common) {
  if (flag == "--kubeconfig") {
    common.kubeconfig = a.value(flag);
    return true;
  }
  if (flag == "--context") {
    common.context = a.value(flag);
    return true;
  }
  return false;
}

bool is_help(const std::string& flag) { return flag == "-h" || flag == "--help"; }

AuditOptions parse_audit(Args& a) {
  AuditOptions o;
  std::string flag;
  while (a.next(flag)) {
    if (common_flag(a, flag, o.common)) continue;
    if (flag == "--max-watches") {
      o.max_watches = a.number(flag, 0, 1L << 40);
    } else if (flag == "--json") {
      a.no_value(flag);
      o.json = true;
    } else {
      a.unknown(flag);
    }
  }
  return o;
}

CacheOptions parse_cache(Args& a) {
  CacheOptions o;
  std::string flag;
  while (a.next(flag)) {
    if (common_flag(a, flag, o.common)) continue;
    if (flag == "--resource") {
      o.resource = a.value(flag);
    } else if (flag == "-n" || flag == "--namespace") {
      o.namespace_ = a.value(flag);
    } else if (flag == "-l" || flag == "--selector") {
      o.label_selector = a.value(flag);
    } else if (flag == "--field-selector") {
      o.field_selector = a.value(flag);
    } else if (flag == "--until-synced") {
      a.no_value(flag);
      o.until_synced = true;
    } else if (flag == "--dump") {
      o.dump = a.value(flag);
      if (o.dump->empty()) throw UsageError("cache: --dump needs a file name (or - for stdout)");
    } else if (flag == "--events") {
      a.no_value(flag);
      o.events = true;
    } else if (flag == "--show-secret-data") {
      a.no_value(flag);
      o.show_secret_data = true;
    } else if (flag == "--timeout") {
      o.timeout_seconds = static_cast<int>(a.number(flag, 1, 86400));
    } else if (flag == "--watch-idle-timeout") {
      o.watch_idle_timeout_seconds = static_cast<int>(a.number(flag, 1, 86400));
    } else {
      a.unknown(flag);
    }
  }
  if (o.resource.empty())
    throw UsageError(
        "cache: --resource is required (pods, secrets, endpoints, endpointslices or "
        "group/version/resource)");
  return o;
}

DemoOptions parse_demo(Args& a) {
  DemoOptions o;
  std::string flag;
  while (a.next(flag)) {
    if (common_flag(a, flag, o.common)) continue;
    if (flag == "--components") {
      o.components = static_cast<int>(a.number(flag, 1, 10000));
    } else if (flag == "--unshared") {
      a.no_value(flag);
      o.unshared = true;
    } else if (flag == "--duration") {
      o.duration_seconds = static_cast<int>(a.number(flag, 1, 86400));
    } else if (flag == "--namespace" || flag == "-n") {
      o.namespace_ = a.value(flag);
      if (o.namespace_.empty()) throw UsageError("demo: --namespace needs a name");
    } else if (flag == "--rate") {
      o.ops_per_second = static_cast<int>(a.number(flag, 0, 1000));
    } else {
      a.unknown(flag);
    }
  }
  return o;
}

bool registry_flag(Args& a, const std::string& flag, RegistryFlags& r) {
  if (flag == "--secret-namespace") {
    r.secret_namespace = a.value(flag);
    if (r.secret_namespace.empty()) throw UsageError("--secret-namespace needs a name");
  } else if (flag == "--secret-selector") {
    r.secret_selector = a.value(flag);
  } else if (flag == "--local-id") {
    r.local_id = a.value(flag);
    if (r.local_id.empty()) throw UsageError("--local-id needs a cluster ID");
  } else if (flag == "--timeout") {
    r.timeout_seconds = static_cast<int>(a.number(flag, 1, 86400));
  } else {
    return false;
  }
  return true;
}

ClustersOptions parse_clusters(Args& a) {
  ClustersOptions o;
  std::string flag;
  while (a.next(flag)) {
    if (common_flag(a, flag, o.common) || registry_flag(a, flag, o.registry)) continue;
    if (flag == "--json") {
      a.no_value(flag);
      o.json = true;
    } else {
      a.unknown(flag);
    }
  }
  return o;
}

EndpointsOptions parse_endpoints(Args& a) {
  EndpointsOptions o;
  std::string flag;
  while (a.next(flag)) {
    if (common_flag(a, flag, o.common) || registry_flag(a, flag, o.registry)) continue;
    if (flag == "-n" || flag == "--namespace") {
      o.namespace_ = a.value(flag);
    } else if (flag == "--port") {
      o.port = a.value(flag);
    } else if (flag == "--subset") {
      o.subset = a.value(flag);
    } else if (flag == "--watch" || flag == "-w") {
      a.no_value(flag);
      o.watch = true;
    } else if (flag == "--json") {
      a.no_value(flag);
      o.json = true;
    } else if (flag.rfind("-", 0) != 0 && o.service.empty()) {
      o.service = flag;
    } else {
      a.unknown(flag);
    }
  }
  if (o.service.empty())
    throw UsageError("endpoints: the service name is required (kwatch endpoints SERVICE -n NS)");
  if (o.namespace_.empty()) throw UsageError("endpoints: -n NAMESPACE is required");
  return o;
}

bool needs_quotes(const std::string& v) {
  if (v.empty()) return true;
  for (char c : v)
    if (c == ' ' || c == '"' || c == '=' || c == '\\' || static_cast<unsigned char>(c) < 0x20)
      return true;
  return false;
}

void write_value(std::ostream& out, const std::string& v) {
  if (!needs_quotes(v)) {
    out << v;
    return;
  }
  out << '"';
  for (char c : v) {
    if (c == '"' || c == '\\')
      out << '\\' << c;
    else if (c == '\n')
      out << "\\n";
    else if (static_cast<unsigned char>(c) < 0x20)
      out << ' ';
    else
      out << c;
  }
  out << '"';
}

}  // namespace

Command parse_args(const std::vector<std::string>& args) {
  if (args.empty())
    throw UsageError("missing subcommand (audit, cache, demo, clusters or endpoints)");
  const std::string& sub = args[0];
  if (is_help(sub) || sub == "help") return HelpCommand{args.size() > 1 ? args[1] : ""};
  std::vector<std::string> rest(args.begin() + 1, args.end());
  for (const auto& r : rest)
    if (is_help(r)) return HelpCommand{sub};
  Args a(rest, sub);
  if (sub == "audit") return parse_audit(a);
  if (sub == "cache") return parse_cache(a);
  if (sub == "demo") return parse_demo(a);
  if (sub == "clusters") return parse_clusters(a);
  if (sub == "endpoints") return parse_endpoints(a);
  throw UsageError("unknown subcommand '" + sub +
                   "' (expected audit, cache, demo, clusters or endpoints)");
}

std::string usage(const std::string& topic) {
  static const std::string common =
      "Common flags:\n"
      "  --kubeconfig FILE   kubeconfig to use (default: $KUBECONFIG, else ~/.kube/config)\n"
      "  --context NAME      context to use (default: the current context)\n"
      "Exit status: 0 ok, 1 check failed, 2 usage/configuration/connection/permission error.\n";
  static const std::string audit =
      "kwatch audit [--max-watches N] [--json]\n"
      "  Counts the API server's open watches per resource from its /metrics.\n"
      "  --max-watches N     exit 1 when any resource has more than N open watches\n"
      "  --json              print {source,total,resources:[{resource,count}]}\n";
  static const std::string cache =
      "kwatch cache --resource R [-n NS] [-l SELECTOR] [--field-selector S] [--until-synced]\n"
      "             [--dump FILE|-] [--events] [--show-secret-data] [--timeout SECONDS]\n"
      "             [--watch-idle-timeout SECONDS]\n"
      "  Runs one informer and shows its cache. R: pods, secrets, endpoints, endpointslices or\n"
      "  group/version/resource (v1/configmaps, apps/v1/deployments).\n"
      "  --until-synced      exit right after the initial sync (after dumping)\n"
      "  --dump FILE         write the cache as JSON lines at exit and on SIGUSR1 (- = stdout);\n"
      "                      default: stdout unless --events is given\n"
      "  --events            print each event (ADDED ns/name rv=...) to stdout\n"
      "  --show-secret-data  do not redact Secret data/stringData\n"
      "  --timeout SECONDS   how long to wait for the initial sync (default 60)\n"
      "  --watch-idle-timeout SECONDS  cut and resume a watch silent this long; the cache\n"
      "                      says stale past it (default 75)\n";
  static const std::string demo =
      "kwatch demo [--components N] [--unshared] [--duration SECONDS] [--namespace NS] [--rate "
      "OPS]\n"
      "  N simulated mesh components share one InformerFactory for Secrets, Pods and\n"
      "  EndpointSlices while objects churn; shows the server's watch count per resource.\n"
      "  --components N      simulated components (default 20)\n"
      "  --unshared          one InformerFactory per component (watches multiply)\n"
      "  --duration SECONDS  churn time (default 20)\n"
      "  --namespace NS      namespace to use (default: create kinformer-demo-<random>)\n"
      "  --rate OPS          churn operations per second (default 20)\n";
  static const std::string registry =
      "  --secret-namespace NS  where the remote kubeconfig Secrets are (default "
      "kinformer-system)\n"
      "  --secret-selector L    which Secrets (default kinformer.io/multicluster=true)\n"
      "  --local-id ID          this cluster's ID (default local)\n"
      "  --timeout SECONDS      how long to wait for the sync, per cluster (default 30)\n";
  static const std::string clusters =
      "kwatch clusters [--json] [registry flags]\n"
      "  Runs the ClusterRegistry (this cluster plus one per kubeconfig in the Secrets) and "
      "prints\n"
      "  each cluster's state (syncing, synced, timed_out, refused, unreachable), its reason,\n"
      "  the watches this process holds there and the server's open WATCH count (its /metrics).\n" +
      registry;
  static const std::string endpoints =
      "kwatch endpoints SERVICE -n NS [--port NAME] [--subset k=v,...] [--watch] [--json] "
      "[registry flags]\n"
      "  The service's endpoints per cluster shard (address, port, ready/serving/terminating,\n"
      "  zone) from the EndpointSlices (and Pods) of every cluster the registry knows. An empty\n"
      "  shard prints as an explicit (empty) row. --watch prints one table per new snapshot.\n"
      "  --port NAME           the service port's name (default: the unnamed port)\n"
      "  --subset k=v,...      only endpoints whose Pod labels match (a label selector)\n"
      "  --json                one JSON object per snapshot\n" +
      registry;
  if (topic == "audit") return audit + common;
  if (topic == "clusters") return clusters + common;
  if (topic == "endpoints") return endpoints + common;
  if (topic == "cache") return cache + common;
  if (topic == "demo") return demo + common;
  return "kwatch: audit API-server watches, inspect an informer cache, demo shared informers,\n"
         "show remote clusters and a service's endpoints across them.\n\n" +
         audit + "\n" + cache + "\n" + demo + "\n" + clusters + "\n" + endpoints + "\n" + common;
}

void log_line(std::ostream& out, const std::string& level, const std::string& msg,
              const std::vector<LogField>& fields) {
  out << "kwatch level=" << level << " msg=";
  write_value(out, msg);
  for (const auto& f : fields) {
    out << ' ' << f.key << '=';
    write_value(out, f.value);
  }
  out << '\n';
}

void log(const std::string& level, const std::string& msg, const std::vector<LogField>& fields) {
  static std::mutex mu;
  std::lock_guard lock(mu);
  log_line(std::cerr, level, msg, fields);
  std::cerr.flush();
}

std::string describe_error(const client::Error& e, const std::string& server) {
  switch (e.code) {
    case client::Errc::tls:
      return "TLS error talking to " + server + ": " + e.message;
    case client::Errc::network:
    case client::Errc::timeout:
      return "cannot reach the API server at " + server + ": " + e.message;
    case client::Errc::auth:
      return "cannot obtain credentials: " + e.message;
    case client::Errc::api:
      if (e.http_status == 403) return "permission denied (HTTP 403): " + e.message;
      if (e.http_status == 401)
        return "unauthorized (HTTP 401): " + server + " rejected the credentials";
      return "the API server answered HTTP " + std::to_string(e.http_status) +
             (e.reason.empty() ? "" : " " + e.reason) + ": " + e.message;
    default:
      return e.to_string();
  }
}

}  // namespace kinformer::tools
