#pragma once
// WriterPreferringMutex: a reader-writer lock under which a waiting writer holds back new readers.
//
// Why not std::shared_mutex: libstdc++ builds it on a default pthread_rwlock_t, and glibc's
// default prefers readers: a writer waits until no reader holds the lock at all. A store read by
// a few threads in turn (handlers, listers, an xDS push per proxy) may never be free of readers,
// and then the informer's writes stall behind them: the cache goes stale, the watch's queue
// fills, and reading from the API server stops. With this lock a writer waits only for the
// readers already inside; readers arriving after it wait for its (short) write.
//
// The price: a thread that already holds the lock shared must not take it shared again (a
// writer that arrived in between would wait for the first hold, the second would wait for the
// writer). Store's callbacks (for_each, index functions) must not call back into the store.
// The other way round, writers that follow each other without a pause hand the lock from one
// to the next and hold readers back until they are done; an informer has one writer per store
// (its reflector), which writes in short turns.
//
// Meets the SharedMutex requirements, so std::shared_lock and std::unique_lock work with it.
// glibc only (>= 2.29: earlier versions could leave readers waiting forever with this kind of
// lock, glibc bug 23861); Debian 12 has 2.36.

#include <pthread.h>

#include <system_error>

#if !defined(__GLIBC__)
#error "kinformer's Store needs glibc's writer-preferring rwlock (see shared_mutex.h)"
#endif

namespace kinformer::cache {

class WriterPreferringMutex {
 public:
  WriterPreferringMutex() noexcept = default;
  ~WriterPreferringMutex() { pthread_rwlock_destroy(&lock_); }
  WriterPreferringMutex(const WriterPreferringMutex&) = delete;
  WriterPreferringMutex& operator=(const WriterPreferringMutex&) = delete;

  void lock() { check(pthread_rwlock_wrlock(&lock_), "pthread_rwlock_wrlock"); }
  bool try_lock() noexcept { return pthread_rwlock_trywrlock(&lock_) == 0; }
  void unlock() noexcept { pthread_rwlock_unlock(&lock_); }

  void lock_shared() { check(pthread_rwlock_rdlock(&lock_), "pthread_rwlock_rdlock"); }
  bool try_lock_shared() noexcept { return pthread_rwlock_tryrdlock(&lock_) == 0; }
  void unlock_shared() noexcept { pthread_rwlock_unlock(&lock_); }

 private:
  // EDEADLK (a relock by the writer) and EAGAIN (2^31 readers at once; libstdc++'s
  // shared_mutex would retry) are bugs, not waits.
  static void check(int rc, const char* what) {
    if (rc != 0) throw std::system_error(rc, std::generic_category(), what);
  }

  // glibc's writer preference: its other "prefer writer" kind behaves like the default.
  pthread_rwlock_t lock_ = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
};

}  // namespace kinformer::cache
