#pragma once
// The number of threads of this process, from /proc/self/task.
#include <dirent.h>

#include <cstddef>

namespace kinformer::testing {

inline std::size_t process_threads() {
  std::size_t n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

}  // namespace kinformer::testing
