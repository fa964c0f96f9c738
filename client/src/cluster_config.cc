#include "kinformer/client/cluster_config.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "detail/base64.h"
#include "detail/sys.h"

namespace kinformer::client {
namespace {

namespace fs = std::filesystem;

std::optional<std::string> read_file(const std::string& path, std::string* why) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *why = detail::errno_text(errno);
    return std::nullopt;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Entry {
  YAML::Node node;   // the inner cluster/user/context map
  std::string file;  // the kubeconfig file it came from (or the origin of in-memory data)
  std::string
      base;  // relative paths resolve here: the file's folder; "" (the current one) for data
};

struct Merged {
  std::map<std::string, Entry> clusters, users, contexts;
  std::string current_context;
  std::string current_context_file;
  std::vector<std::string> files;
  std::size_t empty_files = 0;  // files with no YAML document (empty or only comments)
};

// The one reading of a kubeconfig boolean, for the parser and the policy alike: yaml-cpp's YAML
// 1.1 booleans (y, yes, true, on and their negations, each lower case, Capitalised or UPPER
// CASE). Absent or null: false; anything else: nullopt.
std::optional<bool> yaml_bool(const YAML::Node& n) {
  if (!n || n.IsNull()) return false;
  bool value = false;
  if (!n.IsScalar() || !YAML::convert<bool>::decode(n, value)) return std::nullopt;
  return value;
}

// Reads one field of an entry as a string; throws ConfigError for a non-scalar.
class Fields {
 public:
  Fields(const Entry& entry, std::string what) : entry_(entry), what_(std::move(what)) {}

  [[nodiscard]] std::string prefix() const {
    return "kubeconfig " + entry_.file + ": " + what_ + ": ";
  }
  [[noreturn]] void fail(const std::string& message) const {
    throw ConfigError(prefix() + message);
  }

  std::string str(const char* field) const {
    YAML::Node n = entry_.node[field];
    if (!n || n.IsNull()) return {};
    if (!n.IsScalar()) fail(std::string(field) + " must be a string");
    return n.Scalar();
  }
  bool boolean(const char* field) const {
    std::optional<bool> b = yaml_bool(entry_.node[field]);
    if (!b) fail(std::string(field) + " must be true or false");
    return *b;
  }
  std::string base64(const char* field) const {
    std::string raw = str(field);
    if (raw.empty()) return {};
    auto decoded = detail::base64_decode(raw);
    if (!decoded) fail(std::string(field) + " is not valid base64");
    return *decoded;
  }
  std::string path(const char* field) const {
    std::string p = str(field);
    if (p.empty()) return {};
    if (p.starts_with("~/")) {
      if (const char* home = detail::env("HOME")) p = std::string(home) + p.substr(1);
    }
    fs::path fp(p);
    if (fp.is_relative()) fp = fs::path(entry_.base) / fp;
    return fp.lexically_normal().string();
  }
  std::string file_contents(const char* field) const {
    std::string p = path(field);
    if (p.empty()) return {};
    std::string why;
    auto data = read_file(p, &why);
    if (!data) fail(std::string(field) + " file " + p + " cannot be read: " + why);
    return *data;
  }
  const YAML::Node& node() const { return entry_.node; }
  const std::string& file() const { return entry_.file; }
  const std::string& base() const { return entry_.base; }

 private:
  const Entry& entry_;
  std::string what_;
};

// yaml-cpp messages carry line/column and a reason, never the document's values.
ConfigError invalid_yaml(const std::string& file, const YAML::Exception& e) {
  return ConfigError("kubeconfig " + file + ": invalid YAML: " + e.msg + " (line " +
                     std::to_string(e.mark.line + 1) + ", column " +
                     std::to_string(e.mark.column + 1) + ")");
}

void merge_root(const YAML::Node& root, const std::string& file, const std::string& base,
                Merged& merged);

void merge_file(const std::string& file, Merged& merged) {
  // A folder opens like a file and then fails inside yaml-cpp with a std::ios_base::failure,
  // not a YAML exception: name it here instead.
  if (std::error_code ec; fs::is_directory(file, ec)) {
    throw ConfigError("kubeconfig " + file + ": cannot be read: it is a directory");
  }
  YAML::Node root;
  try {
    root = YAML::LoadFile(file);
  } catch (const YAML::BadFile&) {
    throw ConfigError("kubeconfig " + file + ": cannot be read: " + detail::errno_text(errno));
  } catch (const YAML::Exception& e) {
    throw invalid_yaml(file, e);
  } catch (const std::ios_base::failure&) {
    throw ConfigError("kubeconfig " + file + ": cannot be read: " + detail::errno_text(errno));
  }
  merge_root(root, file, fs::path(file).parent_path().string(), merged);
}

void merge_root(const YAML::Node& root, const std::string& file, const std::string& base,
                Merged& merged) {
  merged.files.push_back(file);
  if (!root || root.IsNull()) {
    ++merged.empty_files;  // allowed in a KUBECONFIG list (kubectl); alone it is an error
    return;
  }
  if (!root.IsMap()) {
    throw ConfigError("kubeconfig " + file + ": expected a YAML mapping at the top level");
  }
  auto section = [&](const char* list, const char* inner, std::map<std::string, Entry>& into) {
    YAML::Node items = root[list];
    if (!items || items.IsNull()) return;
    if (!items.IsSequence()) {
      throw ConfigError("kubeconfig " + file + ": " + list + " must be a list");
    }
    std::size_t index = 0;
    for (const auto& item : items) {
      std::string where = "kubeconfig " + file + ": " + list + "[" + std::to_string(index++) + "]";
      if (!item.IsMap()) throw ConfigError(where + " must be a mapping");
      YAML::Node name = item["name"];
      if (!name || !name.IsScalar() || name.Scalar().empty()) {
        throw ConfigError(where + ": name is missing");
      }
      YAML::Node body = item[inner];
      if (body && !body.IsNull() && !body.IsMap()) {
        throw ConfigError(where + " '" + name.Scalar() + "': " + inner + " must be a mapping");
      }
      into.try_emplace(name.Scalar(),
                       Entry{body ? body : YAML::Node(YAML::NodeType::Map), file, base});
    }
  };
  section("clusters", "cluster", merged.clusters);
  section("users", "user", merged.users);
  section("contexts", "context", merged.contexts);
  if (YAML::Node cc = root["current-context"];
      cc && cc.IsScalar() && !cc.Scalar().empty() && merged.current_context.empty()) {
    merged.current_context = cc.Scalar();
    merged.current_context_file = file;
  }
}

std::string join(const std::vector<std::string>& files) {
  std::string out;
  for (const auto& f : files) out += (out.empty() ? "" : ":") + f;
  return out;
}

// Refuses, before anything is read or run, each field `policy` does not allow (present at all,
// even where kubectl would prefer an inline -data field).
void check_policy(const Fields& entry, const KubeconfigPolicy& policy) {
  auto present = [&](const char* field) {
    YAML::Node n = entry.node()[field];
    return n && !n.IsNull() && !(n.IsScalar() && n.Scalar().empty());
  };
  auto refuse = [&](const char* field, const char* why) {
    throw KubeconfigRefused(entry.prefix() + field + " is refused: " + why, field);
  };
  if (!policy.allow_exec && present("exec")) {
    refuse("exec",
           "an exec credential plugin would run a program on this machine "
           "(KubeconfigPolicy::allow_exec)");
  }
  if (!policy.allow_auth_provider && present("auth-provider")) {
    refuse("auth-provider",
           "auth providers are not accepted here (KubeconfigPolicy::allow_auth_provider)");
  }
  if (!policy.allow_token_file && present("tokenFile")) {
    refuse("tokenFile",
           "it would read a file on this machine; use token (KubeconfigPolicy::allow_token_file)");
  }
  if (!policy.allow_insecure) {
    if (YAML::Node server = entry.node()["server"];
        server && server.IsScalar() && server.Scalar().starts_with("http://")) {
      refuse("server",
             "a plain http:// server would get the credentials in clear text "
             "(KubeconfigPolicy::allow_insecure)");
    }
    // Judged as the parser will read it: every spelling it takes for true is refused.
    if (yaml_bool(entry.node()["insecure-skip-tls-verify"]) == true) {
      refuse("insecure-skip-tls-verify",
             "an unverified server would get the credentials (KubeconfigPolicy::allow_insecure)");
    }
  }
  if (!policy.allow_file_paths) {
    for (const char* field : {"certificate-authority", "client-certificate", "client-key"}) {
      if (present(field)) {
        refuse(field,
               "it is a file path on this machine; use the inline -data field "
               "(KubeconfigPolicy::allow_file_paths)");
      }
    }
  }
}

CredentialsProviderPtr user_credentials(const Fields& user) {
  Credentials base;
  std::string cert_data = user.base64("client-certificate-data");
  std::string key_data = user.base64("client-key-data");
  base.client_cert_pem = !cert_data.empty() ? cert_data : user.file_contents("client-certificate");
  base.client_key_pem = !key_data.empty() ? key_data : user.file_contents("client-key");
  if (base.client_cert_pem.empty() != base.client_key_pem.empty()) {
    user.fail(base.client_cert_pem.empty() ? "client-key is set but client-certificate is missing"
                                           : "client-certificate is set but client-key is missing");
  }
  if (user.node()["auth-provider"]) {
    user.fail("auth-provider is not supported; use an exec credential plugin");
  }
  if (YAML::Node exec = user.node()["exec"]; exec && !exec.IsNull()) {
    if (!exec.IsMap()) user.fail("exec must be a mapping");
    Entry e{exec, user.file(), user.base()};
    Fields f(e, "");
    ExecConfig config;
    config.origin = user.prefix().substr(0, user.prefix().size() - 2);
    config.api_version = f.str("apiVersion");
    if (config.api_version != "client.authentication.k8s.io/v1" &&
        config.api_version != "client.authentication.k8s.io/v1beta1") {
      user.fail("exec.apiVersion must be client.authentication.k8s.io/v1 or v1beta1");
    }
    config.command = f.str("command");
    if (config.command.empty()) user.fail("exec.command is missing");
    if (config.command.find('/') != std::string::npos && fs::path(config.command).is_relative()) {
      config.command = (fs::path(user.base()) / config.command).lexically_normal().string();
    }
    if (YAML::Node args = exec["args"]; args && !args.IsNull()) {
      if (!args.IsSequence()) user.fail("exec.args must be a list of strings");
      for (const auto& a : args) {
        if (!a.IsScalar()) user.fail("exec.args must be a list of strings");
        config.args.push_back(a.Scalar());
      }
    }
    if (YAML::Node env = exec["env"]; env && !env.IsNull()) {
      if (!env.IsSequence()) user.fail("exec.env must be a list of {name, value}");
      for (const auto& kv : env) {
        if (!kv.IsMap() || !kv["name"] || !kv["name"].IsScalar()) {
          user.fail("exec.env entries need a name");
        }
        config.env.emplace_back(kv["name"].Scalar(),
                                kv["value"] && kv["value"].IsScalar() ? kv["value"].Scalar() : "");
      }
    }
    return exec_credentials(std::move(config), std::move(base));
  }
  std::string token_file = user.path("tokenFile");
  std::string token = user.str("token");
  if (!token.empty()) {
    base.token = token;  // kubectl: token wins over tokenFile
    return static_credentials(std::move(base));
  }
  if (!token_file.empty()) {
    std::string why;
    if (!read_file(token_file, &why)) {
      user.fail("tokenFile " + token_file + " cannot be read: " + why);
    }
    return token_file_credentials(token_file, std::move(base));
  }
  if (!base.client_cert_pem.empty()) return static_credentials(std::move(base));
  return nullptr;
}

ClusterConfig from_merged(const Merged& merged, const std::optional<std::string>& context_option,
                          const KubeconfigPolicy* policy);

}  // namespace

ClusterConfig ClusterConfig::from_kubeconfig(const KubeconfigOptions& options) {
  std::vector<std::string> files;
  bool explicit_files = false;
  if (options.path) {
    files.push_back(*options.path);
    explicit_files = true;
  } else {
    std::string env;
    if (options.kubeconfig_env) {
      env = *options.kubeconfig_env;
    } else if (const char* e = detail::env("KUBECONFIG")) {
      env = e;
    }
    std::stringstream ss(env);
    for (std::string item; std::getline(ss, item, ':');) {
      if (!item.empty()) files.push_back(item);
    }
    if (files.empty()) {
      const char* home = detail::env("HOME");
      if (!home) throw ConfigError("kubeconfig: KUBECONFIG is unset and HOME is unknown");
      files.push_back(std::string(home) + "/.kube/config");
      explicit_files = true;
    }
  }
  Merged merged;
  for (const auto& file : files) {
    std::error_code ec;
    // kubectl skips missing files in a KUBECONFIG list; an explicit file must exist.
    if (!explicit_files && !fs::exists(file, ec)) continue;
    merge_file(file, merged);
  }
  if (merged.files.empty()) throw ConfigError("kubeconfig: none of " + join(files) + " exists");
  return from_merged(merged, options.context, nullptr);
}

ClusterConfig ClusterConfig::from_kubeconfig_data(std::string_view yaml,
                                                  const KubeconfigDataOptions& options) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    throw invalid_yaml(options.origin, e);
  }
  Merged merged;
  merge_root(root, options.origin, "", merged);
  return from_merged(merged, options.context, &options.policy);
}

namespace {

ClusterConfig from_merged(const Merged& merged, const std::optional<std::string>& context_option,
                          const KubeconfigPolicy* policy) {
  std::string where = "kubeconfig " + join(merged.files);
  if (merged.empty_files == merged.files.size()) {
    throw ConfigError(where +
                      (merged.files.size() == 1 ? ": the file is empty" : ": every file is empty") +
                      " (no clusters, users or contexts)");
  }
  std::string context_name = context_option.value_or(merged.current_context);
  if (context_name.empty()) {
    throw ConfigError(where + ": current-context is not set and no context was given");
  }
  auto ctx_it = merged.contexts.find(context_name);
  if (ctx_it == merged.contexts.end()) {
    throw ConfigError(where + ": context '" + context_name + "' not found");
  }
  Fields context(ctx_it->second, "context '" + context_name + "'");
  std::string cluster_name = context.str("cluster");
  if (cluster_name.empty()) context.fail("cluster is missing");
  auto cl_it = merged.clusters.find(cluster_name);
  if (cl_it == merged.clusters.end()) context.fail("cluster '" + cluster_name + "' not found");
  Fields cluster(cl_it->second, "cluster '" + cluster_name + "'");
  if (policy) check_policy(cluster, *policy);

  ClusterConfig config;
  config.context = context_name;
  config.namespace_ = context.str("namespace");
  config.server = cluster.str("server");
  if (config.server.empty()) cluster.fail("server is missing");
  if (!config.server.starts_with("https://") && !config.server.starts_with("http://")) {
    cluster.fail("server must be an https:// URL");
  }
  config.insecure_skip_tls_verify = cluster.boolean("insecure-skip-tls-verify");
  config.tls_server_name = cluster.str("tls-server-name");
  config.ca_pem = cluster.base64("certificate-authority-data");
  if (config.ca_pem.empty()) config.ca_pem = cluster.file_contents("certificate-authority");
  if (!config.ca_pem.empty() &&
      config.ca_pem.find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
    cluster.fail("certificate-authority does not contain a PEM certificate");
  }
  if (config.insecure_skip_tls_verify && !config.ca_pem.empty()) {
    cluster.fail("insecure-skip-tls-verify and certificate-authority are mutually exclusive");
  }
  std::string user_name = context.str("user");
  if (!user_name.empty()) {
    auto u_it = merged.users.find(user_name);
    if (u_it == merged.users.end()) context.fail("user '" + user_name + "' not found");
    Fields user(u_it->second, "user '" + user_name + "'");
    if (policy) check_policy(user, *policy);
    config.credentials = user_credentials(user);
  }
  return config;
}

}  // namespace

ClusterConfig ClusterConfig::in_cluster(const InClusterOptions& options) {
  auto env = [](const char* name) -> std::string {
    const char* v = detail::env(name);
    return v ? v : "";
  };
  std::string host = options.host.value_or(env("KUBERNETES_SERVICE_HOST"));
  std::string port = options.port.value_or(env("KUBERNETES_SERVICE_PORT"));
  if (host.empty() || port.empty()) {
    throw ConfigError(
        "in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set");
  }
  std::string dir = options.service_account_dir;
  std::string why;
  std::string token_path = dir + "/token";
  if (!read_file(token_path, &why)) {
    throw ConfigError("in-cluster config: " + token_path + " cannot be read: " + why);
  }
  auto ca = read_file(dir + "/ca.crt", &why);
  if (!ca) throw ConfigError("in-cluster config: " + dir + "/ca.crt cannot be read: " + why);
  ClusterConfig config;
  config.server =
      "https://" + (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + port;
  config.ca_pem = *ca;
  config.credentials = token_file_credentials(token_path);
  config.context = "in-cluster";
  if (auto ns = read_file(dir + "/namespace", &why)) {
    config.namespace_ = *ns;
    while (!config.namespace_.empty() &&
           std::isspace(static_cast<unsigned char>(config.namespace_.back()))) {
      config.namespace_.pop_back();
    }
  }
  return config;
}

ClusterConfig ClusterConfig::load_default(const KubeconfigOptions& options,
                                          const InClusterOptions& pod) {
  // 1. An explicit file: used as given, its errors are the caller's to see.
  if (options.path) return from_kubeconfig(options);
  auto env = [](const char* name) -> std::string {
    const char* v = detail::env(name);
    return v ? v : "";
  };
  std::vector<std::string> tried{"no explicit kubeconfig path was given"};
  // 2. KUBECONFIG, when it names at least one file (":" alone names none, like unset).
  const std::string kubeconfig_env = options.kubeconfig_env.value_or(env("KUBECONFIG"));
  if (kubeconfig_env.find_first_not_of(':') != std::string::npos) {
    try {
      return from_kubeconfig(options);
    } catch (const ConfigError& e) {
      throw ConfigError(std::string("KUBECONFIG is set: ") + e.what());
    }
  }
  tried.emplace_back("KUBECONFIG is not set");
  // 3. In a Pod: the service variables and the token file, as controller-runtime checks. Then
  // in_cluster() decides, and its errors (no ca.crt) stop here rather than pick another cluster.
  const std::string host = pod.host.value_or(env("KUBERNETES_SERVICE_HOST"));
  const std::string port = pod.port.value_or(env("KUBERNETES_SERVICE_PORT"));
  const std::string token_path = pod.service_account_dir + "/token";
  std::error_code ec;
  if (host.empty() || port.empty()) {
    tried.emplace_back(
        "in-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not both set");
  } else if (!fs::exists(token_path, ec)) {
    tried.emplace_back("in-cluster: KUBERNETES_SERVICE_HOST/PORT are set but " + token_path +
                       " does not exist");
  } else {
    return in_cluster(pod);
  }
  // 4. ~/.kube/config.
  const std::string home = env("HOME");
  if (home.empty()) {
    tried.emplace_back("~/.kube/config: HOME is not set");
  } else if (const std::string file = home + "/.kube/config"; !fs::exists(file, ec)) {
    tried.emplace_back(file + " does not exist");
  } else {
    KubeconfigOptions at_home = options;
    at_home.path = file;
    return from_kubeconfig(at_home);
  }
  std::string message = "no cluster configuration found:";
  for (std::size_t i = 0; i < tried.size(); ++i) {
    message += " (" + std::to_string(i + 1) + ") " + tried[i] + ";";
  }
  message.back() = '.';
  throw ConfigError(message);
}

}  // namespace kinformer::client
