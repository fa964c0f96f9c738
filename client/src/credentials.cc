#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rapidjson/document.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string_view>
#include <thread>
#include <vector>

#include "detail/base64.h"
#include "detail/json.h"
#include "detail/sys.h"
#include "kinformer/client/credentials.h"

extern char** environ;

namespace kinformer::client {
namespace {

class StaticCredentials final : public CredentialsProvider {
 public:
  explicit StaticCredentials(Credentials c) : credentials_(std::move(c)) {}
  Result<Credentials> current() override { return credentials_; }

 private:
  const Credentials credentials_;
};

// Re-reads the token when the file's identity, size or modification time changes (kubelet
// rotates projected service-account tokens by swapping a symlink).
class TokenFileCredentials final : public CredentialsProvider {
 public:
  TokenFileCredentials(std::string path, Credentials base)
      : path_(std::move(path)), base_(std::move(base)) {}

  Result<Credentials> current() override {
    struct stat st {};
    if (::stat(path_.c_str(), &st) != 0) {
      const int err = errno;  // before the message's allocations
      return Error::make(Errc::auth,
                         "token file " + path_ + " cannot be read: " + detail::errno_text(err));
    }
    std::lock_guard lock(mu_);
    if (!unchanged(st)) {
      std::ifstream in(path_, std::ios::binary);
      if (!in) {
        const int err = errno;
        return Error::make(Errc::auth,
                           "token file " + path_ + " cannot be read: " + detail::errno_text(err));
      }
      std::stringstream ss;
      ss << in.rdbuf();
      std::string token = ss.str();
      while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) {
        token.pop_back();
      }
      if (token.empty()) return Error::make(Errc::auth, "token file " + path_ + " is empty");
      token_ = std::move(token);
      ino_ = st.st_ino;
      size_ = st.st_size;
      mtime_ = st.st_mtim;
      loaded_ = true;
    }
    Credentials c = base_;
    c.token = token_;
    return c;
  }

  void invalidate() noexcept override {
    std::lock_guard lock(mu_);
    loaded_ = false;
  }

 private:
  // The same file as last read: same inode (no rename swapped it in), size and mtime (nobody
  // wrote it in place). Content is not compared: an in-place rewrite of the same size within one
  // filesystem timestamp tick goes unseen until a 401 (invalidate()); kubelet swaps a symlink
  // to a new file, so projected tokens always change inode.
  bool unchanged(const struct stat& st) const {
    return loaded_ && st.st_ino == ino_ && st.st_size == size_ && same_time(st.st_mtim, mtime_);
  }
  static bool same_time(const timespec& a, const timespec& b) {
    return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
  }

  const std::string path_;
  const Credentials base_;
  std::mutex mu_;
  bool loaded_ = false;
  std::string token_;
  ino_t ino_ = 0;
  off_t size_ = 0;
  timespec mtime_{};
};

// "2024-01-02T03:04:05Z", "2024-01-02T03:04:05.123+02:00".
std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view s) {
  std::tm tm{};
  int consumed = 0;
  std::string str(s);
  if (std::sscanf(str.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &consumed) != 6) {
    return std::nullopt;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  std::time_t t = timegm(&tm);
  std::string_view rest = s.substr(static_cast<std::size_t>(consumed));
  if (!rest.empty() && rest.front() == '.') {
    rest.remove_prefix(1);
    while (!rest.empty() && std::isdigit(static_cast<unsigned char>(rest.front()))) {
      rest.remove_prefix(1);
    }
  }
  if (rest == "Z" || rest == "z") {
  } else if (rest.size() == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':') {
    int h = std::atoi(std::string(rest.substr(1, 2)).c_str());
    int m = std::atoi(std::string(rest.substr(4, 2)).c_str());
    long offset = (h * 3600L + m * 60L) * (rest[0] == '+' ? 1 : -1);
    t -= offset;
  } else {
    return std::nullopt;
  }
  return std::chrono::system_clock::from_time_t(t);
}

class ExecCredentials final : public CredentialsProvider {
 public:
  ExecCredentials(ExecConfig config, Credentials base)
      : config_(std::move(config)), base_(std::move(base)) {}

  Result<Credentials> current() override {
    std::lock_guard lock(mu_);
    auto now = std::chrono::system_clock::now();
    if (cached_ && (!cached_->expiry || *cached_->expiry > now + std::chrono::seconds(10))) {
      return *cached_;
    }
    auto fresh = run();
    if (!fresh) return fresh;
    cached_ = fresh.value();
    return fresh;
  }

  void invalidate() noexcept override {
    std::lock_guard lock(mu_);
    cached_.reset();
  }

 private:
  Error fail(const std::string& what) const {
    return Error::make(Errc::auth,
                       config_.origin + ": exec plugin " + config_.command + ": " + what);
  }

  // Sets `name` in `env` ("NAME=value" entries), replacing an earlier value.
  static void set_env(std::vector<std::string>& env, std::string_view name,
                      std::string_view value) {
    std::string entry = std::string(name) + "=" + std::string(value);
    for (auto& e : env) {
      if (e.size() > name.size() && e.starts_with(name) && e[name.size()] == '=') {
        e = std::move(entry);
        return;
      }
    }
    env.push_back(std::move(entry));
  }

  // kubectl's order, each name once: the inherited environment, then kubeconfig's exec.env (a
  // later entry wins), then KUBERNETES_EXEC_INFO. With duplicate entries a plugin's getenv()
  // would see the first, i.e. the inherited value.
  std::vector<std::string> child_environment() const {
    std::vector<std::string> env;
    for (char** e = environ; e && *e; ++e) {
      std::string_view entry(*e);
      auto eq = entry.find('=');
      if (eq == std::string_view::npos || eq == 0) continue;
      set_env(env, entry.substr(0, eq), entry.substr(eq + 1));
    }
    for (const auto& [k, v] : config_.env) set_env(env, k, v);
    set_env(env, "KUBERNETES_EXEC_INFO",
            R"({"apiVersion":")" + config_.api_version +
                R"(","kind":"ExecCredential","spec":{"interactive":false}})");
    return env;
  }

  Error timed_out_error() const {
    return fail("timed out after " + std::to_string(config_.timeout.count()) + "s");
  }

  // Runs the plugin in its own process group, with one deadline from start to exit: output
  // that arrives in time does not help a plugin that then keeps running (the lock in current()
  // is held meanwhile). At the deadline the whole group is killed and reaped.
  Result<Credentials> run() {
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) {
      const int err = errno;
      return fail(std::string("pipe: ") + detail::errno_text(err));
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);  // a new group whose id is the child's pid
    std::vector<std::string> env_strings = child_environment();
    std::vector<char*> envp;
    envp.reserve(env_strings.size());
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> arg_strings{config_.command};
    arg_strings.insert(arg_strings.end(), config_.args.begin(), config_.args.end());
    std::vector<char*> argv;
    argv.reserve(arg_strings.size());
    for (auto& s : arg_strings) argv.push_back(s.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    int rc = posix_spawnp(&pid, config_.command.c_str(), &actions, &attr, argv.data(), envp.data());
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    if (rc != 0) {
      ::close(out[0]);
      return fail(std::string("cannot be started: ") + detail::errno_text(rc));
    }
    auto deadline = std::chrono::steady_clock::now() + config_.timeout;
    auto left = [&] {
      return std::chrono::ceil<std::chrono::milliseconds>(deadline -
                                                          std::chrono::steady_clock::now());
    };
    std::string output;
    bool timed_out = false;
    char buf[4096];
    for (;;) {
      auto wait = left();  // once: a second reading could be negative, and poll(-1) never returns
      if (wait.count() <= 0) {
        timed_out = true;
        break;
      }
      pollfd pfd{out[0], POLLIN, 0};
      int p = ::poll(&pfd, 1, static_cast<int>(wait.count()));
      if (p < 0 && errno == EINTR) continue;
      if (p <= 0) {
        timed_out = p == 0;
        break;
      }
      ssize_t n = ::read(out[0], buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      output.append(buf, static_cast<std::size_t>(n));
      if (output.size() > (1u << 20)) break;
    }
    ::close(out[0]);
    int status = 0;
    bool status_known = true;
    // Stdout is closed (or the deadline passed): wait for the exit until the deadline.
    while (!timed_out) {
      pid_t w = ::waitpid(pid, &status, WNOHANG);
      if (w == pid) break;
      if (w < 0 && errno == ECHILD) {
        // The host ignores SIGCHLD, so the system reaped the plugin: its exit status is gone;
        // the output decides.
        status_known = false;
        break;
      }
      if (w < 0 && errno != EINTR) {
        int err = errno;
        ::kill(-pid, SIGKILL);
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        return fail(std::string("waitpid: ") + detail::errno_text(err));
      }
      auto wait = left();
      if (wait.count() <= 0) {
        timed_out = true;
        break;
      }
      std::this_thread::sleep_for(std::min(wait, std::chrono::milliseconds(10)));
    }
    if (timed_out) {
      ::kill(-pid, SIGKILL);  // the plugin and whatever it started
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return timed_out_error();
    }
    if (status_known && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
      return fail("exited with status " +
                  std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1));
    }
    return parse(output);
  }

  Result<Credentials> parse(std::string& output) const {
    rapidjson::Document doc;
    doc.Parse(output.c_str(), output.size());
    if (doc.HasParseError() || !doc.IsObject()) {
      return fail("output is not an ExecCredential JSON object");
    }
    if (detail::get_string(doc, "kind") != "ExecCredential") {
      return fail("output kind is not ExecCredential");
    }
    std::string_view api = detail::get_string(doc, "apiVersion");
    if (!config_.api_version.empty() && api != config_.api_version) {
      return fail("output apiVersion '" + std::string(api) + "' does not match the configured '" +
                  config_.api_version + "'");
    }
    const JsonValue* status = detail::member(doc, "status");
    if (!status || !status->IsObject()) return fail("output has no status");
    Credentials c = base_;
    if (auto t = detail::get_string(*status, "token"); !t.empty()) c.token = t;
    auto cert = detail::get_string(*status, "clientCertificateData");
    auto key = detail::get_string(*status, "clientKeyData");
    if (cert.empty() != key.empty()) {
      return fail("status must set both clientCertificateData and clientKeyData");
    }
    if (!cert.empty()) {
      c.client_cert_pem = cert;
      c.client_key_pem = key;
    }
    if (c.token.empty() && c.client_cert_pem.empty()) {
      return fail("status has neither token nor clientCertificateData");
    }
    if (auto e = detail::get_string(*status, "expirationTimestamp"); !e.empty()) {
      auto when = parse_rfc3339(e);
      if (!when) return fail("status.expirationTimestamp is not an RFC 3339 time");
      c.expiry = when;
    }
    return c;
  }

  const ExecConfig config_;
  const Credentials base_;
  std::mutex mu_;
  std::optional<Credentials> cached_;
};

}  // namespace

CredentialsProviderPtr static_credentials(Credentials credentials) {
  return std::make_shared<StaticCredentials>(std::move(credentials));
}

CredentialsProviderPtr token_file_credentials(std::string path, Credentials base) {
  return std::make_shared<TokenFileCredentials>(std::move(path), std::move(base));
}

CredentialsProviderPtr exec_credentials(ExecConfig config, Credentials base) {
  return std::make_shared<ExecCredentials>(std::move(config), std::move(base));
}

}  // namespace kinformer::client
