#pragma once
// The bytes of heap this process has allocated and not freed: malloc's own count, or the
// sanitizer allocator's under ASan and TSan (which replace malloc, so mallinfo2() says nothing).
#include <cstddef>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#include <sanitizer/allocator_interface.h>
#else
#include <malloc.h>
#endif

namespace kinformer::testing {

inline std::size_t heap_in_use() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return __sanitizer_get_current_allocated_bytes();
#else
  const struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;  // in use from the heap, and in chunks of their own
#endif
}

}  // namespace kinformer::testing
