#pragma once
// Test helpers for files, folders, environment variables and exec credential plugins.

#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

namespace kinformer::testing {

/// A fresh folder under /tmp, removed with everything in it on destruction.
struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/kinformer-client-test-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  /// Writes `content` to `name` (folders created as needed) and returns the full path.
  std::string write(const std::string& name, const std::string& content,
                    std::filesystem::perms perms = std::filesystem::perms::owner_all) const {
    std::string p = path + "/" + name;
    std::filesystem::create_directories(std::filesystem::path(p).parent_path());
    std::ofstream(p, std::ios::binary | std::ios::trunc) << content;
    std::filesystem::permissions(p, perms);
    return p;
  }
  /// The file's content ("" when it does not exist).
  [[nodiscard]] std::string read(const std::string& name) const {
    std::ifstream in(path + "/" + name, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  [[nodiscard]] bool exists(const std::string& name) const {
    return std::filesystem::exists(path + "/" + name);
  }

  std::string path;
};

/// Sets (or, with nullopt, unsets) an environment variable for its lifetime, then restores it.
/// Only for tests that run no other thread while it is alive.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::optional<std::string>& value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = old;
    if (value) {
      ::setenv(name_.c_str(), value->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

/// "2024-01-02T03:04:05Z" for `t` (whole seconds, UTC).
inline std::string rfc3339(std::chrono::system_clock::time_point t) {
  std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  ::gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

/// An exec credential plugin in `dir` named `name`: each run appends a line to `runs` and
/// prints `out.json` from its folder with every "@N@" replaced by the run's number (1, 2, ...).
inline std::string write_plugin(const TempDir& dir, const std::string& name = "plugin.sh") {
  return dir.write(name,
                   "#!/bin/sh\n"
                   "d=$(dirname \"$0\")\n"
                   "echo run >> \"$d/runs\"\n"
                   "n=$(wc -l < \"$d/runs\" | tr -d ' ')\n"
                   "sed \"s/@N@/$n/g\" \"$d/out.json\"\n");
}

/// How many times the write_plugin() plugin in `dir` ran.
inline int plugin_runs(const TempDir& dir) {
  std::string runs = dir.read("runs");
  int n = 0;
  for (char c : runs) n += c == '\n';
  return n;
}

/// An ExecCredential JSON document (the plugin's output).
inline std::string exec_credential(const std::string& api_version, const std::string& status_json) {
  return R"({"apiVersion":")" + api_version + R"(","kind":"ExecCredential","status":)" +
         status_json + "}\n";
}

/// `s` as the inside of a JSON string (PEM newlines become \n).
inline std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace kinformer::testing
