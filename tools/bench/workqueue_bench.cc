// kinformer_workqueue_bench: controller::WorkQueue under 8 workers. Its client-go peer,
// tools/bench/cmd/clientgo-workqueue (k8s.io/client-go/util/workqueue's rate-limiting queue),
// does the same the same way; tools/bench/workqueue.sh runs both, interleaved, and prints the
// table (docs/BENCHMARKS.md, "Work queue").
//
// One run of this program:
//   1. builds --keys distinct keys "bench/object-NNNNNNN" (before any measurement);
//   2. memory: with no worker, adds every key to a fresh queue (default rate limiter, no
//      metrics) and reads heap in use (mallinfo2) and VmRSS before and after; bytes per queued
//      key = the heap delta / keys (the Go peer: HeapAlloc after runtime.GC());
//   3. throughput, --rounds times: a fresh queue, --workers workers looping get(), forget(),
//      done(); one producer adds every key; the round's time runs from just before the first
//      add to the done() of the last key; keys/s per round;
//   4. prints one JSON object on stdout: the rounds' keys/s, their median, the memory figures,
//      VmHWM and the CPU seconds of the whole run.
#include <malloc.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "kinformer/controller/work_queue.h"

using namespace kinformer;

namespace {

int flag(int argc, char** argv, std::string_view name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (name == argv[i]) return std::atoi(argv[i + 1]);
  }
  return fallback;
}

// One throughput round: keys/s.
double round_keys_per_second(const std::vector<std::string>& keys, int workers) {
  controller::WorkQueue queue;
  const std::size_t total = keys.size();
  std::atomic<std::size_t> processed{0};
  std::mutex mu;
  std::condition_variable all_done;
  std::chrono::steady_clock::time_point end;
  bool finished = false;
  std::vector<std::jthread> threads;
  threads.reserve(static_cast<std::size_t>(workers));
  for (int i = 0; i < workers; ++i) {
    threads.emplace_back([&] {
      while (auto key = queue.get()) {
        queue.forget(*key);
        queue.done(*key);
        if (processed.fetch_add(1) + 1 == total) {
          std::lock_guard lock(mu);
          end = std::chrono::steady_clock::now();
          finished = true;
          all_done.notify_one();
        }
      }
    });
  }
  const auto start = std::chrono::steady_clock::now();
  for (const auto& key : keys) queue.add(key);
  {
    std::unique_lock lock(mu);
    all_done.wait(lock, [&] { return finished; });
  }
  queue.shut_down();
  threads.clear();  // joins
  return static_cast<double>(total) / std::chrono::duration<double>(end - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int n = flag(argc, argv, "--keys", 100000);
  const int workers = flag(argc, argv, "--workers", 8);
  const int rounds = flag(argc, argv, "--rounds", 5);
  if (n < 1 || workers < 1 || rounds < 1) {
    std::fprintf(stderr, "usage: %s [--keys N] [--workers W] [--rounds R]\n", argv[0]);
    return 2;
  }
  std::vector<std::string> keys;
  keys.reserve(static_cast<std::size_t>(n));
  char buf[64];
  for (int i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof(buf), "bench/object-%07d", i);
    keys.emplace_back(buf);
  }

  // Memory: every key queued, none handed out.
  malloc_trim(0);
  const std::size_t heap_before = bench::heap_in_use();
  const std::uint64_t rss_before_kb = bench::proc_status("VmRSS");
  double heap_per_key = 0;
  double rss_per_key = 0;
  {
    controller::WorkQueue queue;
    for (const auto& key : keys) queue.add(key);
    if (queue.len() != keys.size()) {
      std::fprintf(stderr, "queued %zu of %zu keys\n", queue.len(), keys.size());
      return 1;
    }
    heap_per_key = static_cast<double>(bench::heap_in_use() - heap_before) / n;
    rss_per_key = static_cast<double>(bench::proc_status("VmRSS") - rss_before_kb) * 1024.0 / n;
  }

  std::vector<double> rates;
  rates.reserve(static_cast<std::size_t>(rounds));
  for (int r = 0; r < rounds; ++r) rates.push_back(round_keys_per_second(keys, workers));

  std::printf("{\"side\":\"kinformer\",\"keys\":%d,\"workers\":%d,\"rounds\":[", n, workers);
  for (std::size_t i = 0; i < rates.size(); ++i) std::printf("%s%.0f", i == 0 ? "" : ",", rates[i]);
  std::printf(
      "],\"keys_per_s_median\":%.0f,\"heap_bytes_per_queued_key\":%.1f,"
      "\"rss_bytes_per_queued_key\":%.1f,\"vmhwm_kb\":%llu,\"cpu_s\":%.3f}\n",
      bench::quantile(rates, 0.5), heap_per_key, rss_per_key,
      static_cast<unsigned long long>(bench::proc_status("VmHWM")), bench::cpu_seconds());
  return 0;
}
