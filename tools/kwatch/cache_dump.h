#pragma once
// `kwatch cache`'s pure pieces: resolving --resource, the JSON-lines dump (sorted, Secret data
// redacted), event lines, and the wait for the initial sync (what each poll decides, the progress
// line). No I/O but write_dump_file, so tests feed fake objects and errors.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kinformer/client/error.h"
#include "kinformer/client/object.h"
#include "kinformer/client/resource.h"
#include "kinformer/informer/reflector.h"

namespace kinformer::tools {

/// What --resource names.
struct ResolvedResource {
  client::GroupVersionResource gvr;
  /// False for the built-in aliases; true for group/version/resource, whose kind and scope come
  /// from discovery (apply_discovery).
  bool needs_discovery = false;
};

/// Resolves pods|secrets|endpoints|endpointslices (and singular/short forms po, secret, ep ...)
/// or "group/version/resource" ("v1/configmaps" or "/v1/configmaps" for the core group).
/// Throws UsageError naming `name` when it is neither.
ResolvedResource resolve_resource(const std::string& name);

/// Fills gvr.kind and gvr.namespaced from a discovery document (APIResourceList JSON of
/// gvr's group/version). Returns false when the document does not list gvr.resource.
bool apply_discovery(std::string_view api_resource_list_json, client::GroupVersionResource& gvr);

/// True for core/v1 secrets.
bool is_secret_resource(const client::GroupVersionResource& gvr);

/// Parses an object's JSON and returns it compact, with every value of `data` and `stringData`
/// replaced by "<redacted>". Unparsable input gives {"error":"unparsable object (redacted)"}:
/// it never echoes the input.
std::string redact_secret_json(std::string_view json);

/// How to dump objects.
struct DumpOptions {
  /// The objects are core/v1 Secrets (list items carry no kind, so the caller says).
  bool secret_resource = false;
  /// --show-secret-data: keep Secret data/stringData.
  bool show_secret_data = false;
};

/// One dump line (no trailing newline): the object as the server sent it (DynamicObject::json,
/// compacted). A Secret (secret_resource, or kind "Secret") is redacted unless show_secret_data.
/// Objects without JSON (typed models) give their metadata only.
std::string dump_line(const client::Object& object, const DumpOptions& options);

/// The whole dump: one line per object, sorted by namespace then name, each ending in '\n'.
std::string format_dump(std::vector<client::ObjectPtr> objects, const DumpOptions& options);

/// Writes `text` to `path`. A regular file (or a new one) is replaced atomically (FILE.tmp, then
/// rename) so that a reader never sees half a dump; anything else — a symlink, /dev/stdout, a
/// FIFO, a device such as /dev/null — is written in place and never replaced. False on failure.
bool write_dump_file(const std::string& path, const std::string& text);

/// "ADDED ns/name rv=123" (DELETED of a tombstone adds " final-state-unknown").
std::string format_event(std::string_view type, const client::Object& object,
                         bool final_state_unknown = false);

/// Where the dump goes: --dump when given, else stdout ("-") unless --events, else nowhere.
std::optional<std::string> dump_target(const std::optional<std::string>& dump, bool events);

/// A list/watch error waiting will not fix: the server answered 401, 403 or 404.
bool permanent_sync_error(const client::Error& e);

/// What one poll of the wait for the initial sync finds.
enum class SyncState {
  synced,     ///< the informer has synced
  failed,     ///< not synced, and the last list/watch error is permanent_sync_error
  timed_out,  ///< not synced, and --timeout has passed
  syncing,    ///< keep waiting
};
/// Checked in that order: a sync wins over an error, a permanent error over the timeout.
SyncState sync_state(bool has_synced, const std::optional<client::Error>& last_error,
                     bool past_deadline);

/// A change in a synced cache's freshness worth a line.
enum class FreshnessChange {
  none,
  stale,        ///< it turned stale: nothing from the server past the idle deadline
  fresh_again,  ///< it was reported stale and is fresh now (resyncing is not fresh yet)
};
/// Compares `f` with what was last reported (`reported_stale`) and updates that.
FreshnessChange freshness_change(const informer::Freshness& f, bool& reported_stale);

/// Elapsed time with one decimal: "0.2s", "12.0s".
std::string format_seconds(std::chrono::milliseconds elapsed);

/// The progress line a terminal's stderr shows while syncing (no newline; it starts by clearing
/// the line): "\r\x1b[Ksyncing pods (all namespaces) 1.2s", then " retrying after: " and the
/// last error's first 100 characters when there was one.
std::string format_sync_progress(const std::string& resource, const std::string& where,
                                 std::chrono::milliseconds elapsed,
                                 const std::optional<client::Error>& last_error);

}  // namespace kinformer::tools
