#pragma once
// Private: which informer's reflector is running on this thread (in a transform or an
// on_synced callback), so that calls that would wait for that reflector can refuse instead.

namespace kinformer::informer {
class SharedInformer;
namespace detail {

/// The informer whose reflector is calling out on this thread now; null if none.
[[nodiscard]] const SharedInformer* delivering_informer() noexcept;

}  // namespace detail
}  // namespace kinformer::informer
