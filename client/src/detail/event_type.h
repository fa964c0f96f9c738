#pragma once
// The watch event's "type" as both wire formats carry it (a string), and what both decoders
// make of an ERROR event that does not carry a Status.

#include <optional>
#include <string>
#include <string_view>

#include "kinformer/client/error.h"
#include "kinformer/client/watch.h"

namespace kinformer::client::detail {

/// ADDED, MODIFIED, DELETED, BOOKMARK; nullopt for anything else (ERROR is the caller's case).
inline std::optional<EventType> event_type_of(std::string_view type) noexcept {
  if (type == "ADDED") return EventType::added;
  if (type == "MODIFIED") return EventType::modified;
  if (type == "DELETED") return EventType::deleted;
  if (type == "BOOKMARK") return EventType::bookmark;
  return std::nullopt;
}

/// An ERROR event whose object is of another kind than Status: still the server's failure, so
/// Errc::api (HTTP 500, as for a Status without a code), but nothing of the object is shown: it
/// could be any object, a Secret even. `where` names the event.
inline Error error_event_without_status(const std::string& where) {
  Error e = Error::make(Errc::api, where + ": ERROR event whose object is not a Status");
  e.http_status = 500;
  return e;
}

}  // namespace kinformer::client::detail
