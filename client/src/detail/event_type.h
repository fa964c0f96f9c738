#pragma once
// The watch event's "type" as both wire formats carry it (a string).

#include <optional>
#include <string_view>

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

}  // namespace kinformer::client::detail
