#pragma once
// `kwatch demo`'s output: the live table, the one-line-per-tick form and the verdict. Pure
// functions of a snapshot, so tests check them without a cluster.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kinformer::tools {

/// One resource's line of the demo table.
struct DemoRow {
  std::string resource;      ///< "secrets", "pods", "endpointslices"
  std::size_t objects = 0;   ///< objects in the (first) component's cache
  std::uint64_t events = 0;  ///< events delivered to all components' handlers
  /// The server's open WATCH requests for the resource minus the baseline taken before the
  /// components started; -1 when /metrics could not be read.
  long server_watches = -1;
};

struct DemoSnapshot {
  std::string namespace_;
  bool unshared = false;
  std::size_t components = 0;
  std::size_t handlers = 0;  ///< sum of InformerFactory::handler_counts()
  long elapsed_seconds = 0;
  long duration_seconds = 0;
  std::vector<DemoRow> rows;
};

/// The multi-line table (each line ends in '\n').
std::string format_demo_table(const DemoSnapshot& s, std::uint64_t churn_ops,
                              std::uint64_t churn_errors);
/// One line (no newline) for a non-terminal stdout.
std::string format_demo_tick(const DemoSnapshot& s);

struct DemoVerdict {
  std::string line;  ///< "verdict: OK — ..."
  int exit_code = 0;
};

/// OK: shared mode, every resource at most 1 watch, caches converged. MULTIPLIED: unshared
/// mode (expected; exit 0). FAILED (exit 1): `diverged` is not empty, or shared mode saw more
/// than 1 watch on a resource.
DemoVerdict demo_verdict(const DemoSnapshot& s, const std::vector<std::string>& diverged);

}  // namespace kinformer::tools
