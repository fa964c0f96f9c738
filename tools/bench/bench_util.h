#pragma once
// What the benchmark programs of tools/bench measure of their own process, and how they sum it
// up: /proc readers (threads, RSS, bytes read, steal time), CPU time, TCP bytes received, heap in
// use; the log-linear latency histogram and the quantile of a sample. The client-go peers measure
// the same way (tools/bench/internal/procfs and internal/stats).
#include <linux/tcp.h>  // struct tcp_info with tcpi_bytes_received (glibc's lacks it)
#include <malloc.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace kinformer::bench {

// A numeric field of a /proc file of "Name: value" lines (/proc/self/status: kB or a count;
// /proc/self/io: bytes); 0 when absent.
inline std::uint64_t proc_field(const char* file, std::string_view field) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > field.size() && line.compare(0, field.size(), field) == 0 &&
        line[field.size()] == ':') {
      return std::stoull(line.substr(field.size() + 1));
    }
  }
  return 0;
}

// A numeric field of /proc/self/status ("Threads"; "VmRSS", "VmHWM" in kB); 0 when absent.
inline std::uint64_t proc_status(std::string_view field) {
  return proc_field("/proc/self/status", field);
}

// The process's OS threads (/proc/self/status Threads).
inline std::uint64_t thread_count() { return proc_status("Threads"); }

// Bytes the process has read through read(2) and friends, sockets included (/proc/self/io).
inline std::uint64_t rchar() { return proc_field("/proc/self/io", "rchar"); }

// The process's user + system CPU time (getrusage, all threads), seconds.
inline double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto tv = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
  };
  return tv(ru.ru_utime) + tv(ru.ru_stime);
}

// The machine's steal time so far (all CPUs, /proc/stat's "cpu" line; USER_HZ ticks), seconds:
// time a virtual machine's CPUs were ready but held by the hypervisor.
inline double steal_seconds() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  std::array<double, 8> v{};
  in >> cpu >> v[0] >> v[1] >> v[2] >> v[3] >> v[4] >> v[5] >> v[6] >> v[7];
  return cpu == "cpu" ? v[7] / static_cast<double>(sysconf(_SC_CLK_TCK)) : 0.0;
}

struct TcpBytes {
  std::uint64_t bytes = 0;
  int sockets = 0;
};

// tcpi_bytes_received (TCP_INFO) summed over the process's open TCP sockets.
inline TcpBytes tcp_bytes_received() {
  TcpBytes out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    std::error_code lec;
    auto target = std::filesystem::read_symlink(e.path(), lec);
    if (lec || target.native().rfind("socket:", 0) != 0) continue;
    int fd = 0;
    try {
      fd = std::stoi(e.path().filename().native());
    } catch (const std::logic_error&) {
      continue;
    }
    tcp_info info{};
    socklen_t len = sizeof(info);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) continue;  // not TCP
    out.bytes += info.tcpi_bytes_received;
    ++out.sockets;
  }
  return out;
}

// Heap in use: malloc's in-use bytes plus its mmapped chunks (mallinfo2()).
inline std::size_t heap_in_use() {
  struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}

// Log-linear histogram of non-negative nanosecond values: 32 sub-buckets per power of two (at
// most ~3% relative error). Not thread-safe: one writer (a handler's serial strand). The Go
// peers use the same bucketing (internal/stats.Histogram).
class Histogram {
 public:
  static constexpr int kSub = 5;  // 2^5 sub-buckets
  static constexpr int kBuckets = (64 - kSub + 1) << kSub;

  void add(std::int64_t v) {
    if (v < 0) v = 0;
    ++counts_[index(static_cast<std::uint64_t>(v))];
    ++total_;
  }
  void merge(const Histogram& o) {
    for (int i = 0; i < kBuckets; ++i) counts_[i] += o.counts_[i];
    total_ += o.total_;
  }
  [[nodiscard]] std::uint64_t total() const { return total_; }
  // The upper bound of the bucket holding the q-quantile; 0 when empty.
  [[nodiscard]] std::int64_t quantile(double q) const {
    if (total_ == 0) return 0;
    auto rank = static_cast<std::uint64_t>(q * static_cast<double>(total_ - 1)) + 1;
    std::uint64_t seen = 0;
    for (int i = 0; i < kBuckets; ++i) {
      seen += counts_[i];
      if (seen >= rank) return upper(i);
    }
    return upper(kBuckets - 1);
  }

 private:
  static int index(std::uint64_t v) {
    if (v < (1u << kSub)) return static_cast<int>(v);
    int msb = 63 - std::countl_zero(v);  // >= kSub
    int shift = msb - kSub;
    return ((shift + 1) << kSub) + static_cast<int>((v >> shift) & ((1u << kSub) - 1));
  }
  static std::int64_t upper(int i) {
    if (i < (1 << kSub)) return i;
    int shift = (i >> kSub) - 1;
    std::uint64_t mant = (1u << kSub) | static_cast<std::uint64_t>(i & ((1 << kSub) - 1));
    return static_cast<std::int64_t>(((mant + 1) << shift) - 1);
  }
  std::array<std::uint64_t, kBuckets> counts_{};
  std::uint64_t total_ = 0;
};

// The q-quantile of a sample: the sorted value at the rounded rank q x (n - 1); -1 when empty.
// The Go peers compute it the same way (internal/stats.Quantile).
inline double quantile(std::vector<double> v, double q) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  auto i = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

}  // namespace kinformer::bench
