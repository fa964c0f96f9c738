#pragma once
// `kwatch demo`'s pure pieces: the live table, the one-line-per-tick form, the convergence and
// settling checks and the verdict. Functions of a snapshot (or of name -> resourceVersion maps),
// so tests check them without a cluster.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
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
/// Moves a terminal's cursor up `lines` lines and clears to the end of the screen, so that the
/// next table replaces the last one; "" for 0.
std::string erase_lines(std::size_t lines);

/// name -> resourceVersion of one resource's objects: a cache's or the server list's view.
using ObjectVersions = std::map<std::string, std::string>;

/// The convergence check of one resource: "pods (2 caches differ)" when any of `caches` is not
/// `server`, nullopt when all equal it.
std::optional<std::string> cache_divergence(const std::string& resource,
                                            const ObjectVersions& server,
                                            const std::vector<ObjectVersions>& caches);
/// The divergence entry of a resource whose server list failed: "pods (list failed: ERROR)".
std::string list_failed_divergence(const std::string& resource, const std::string& error);

/// True when every row shows the server watches the mode settles on: 1 per resource shared,
/// one per component unshared (the server's count lags the connections a little).
bool watches_settled(const DemoSnapshot& s);

struct DemoVerdict {
  std::string line;  ///< "verdict: OK — ..."
  int exit_code = 0;
};

/// OK: shared mode, every resource at most 1 watch, caches converged. MULTIPLIED: unshared
/// mode (expected; exit 0). FAILED (exit 1): `diverged` is not empty, or shared mode saw more
/// than 1 watch on a resource.
DemoVerdict demo_verdict(const DemoSnapshot& s, const std::vector<std::string>& diverged);

}  // namespace kinformer::tools
