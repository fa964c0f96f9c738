#include "kinformer/client/interned_string.h"

#include <array>
#include <memory>
#include <mutex>
#include <ostream>
#include <unordered_set>

namespace kinformer::client {

// The pool keeps one entry per distinct text. Invariant: an entry in the pool has a count of at
// least 1 whenever its shard's mutex is free. Lookups take the mutex and count the entry they
// return; a holder copying a value counts without it (it already holds one, so the count cannot
// reach 0 meanwhile); the last release takes the mutex before its count reaches 0 and removes
// the entry under it, so a lookup can never find an entry that is being freed.
struct InternedString::Entry {
  std::atomic<std::uint64_t> refs;
  std::size_t hash;
  std::string text;
  bool pooled = true;  // false: made by unpooled(), in no shard
};

namespace {

struct Probe {
  std::string_view text;
  std::size_t hash;
};

struct EntryHash {
  using is_transparent = void;
  std::size_t operator()(const InternedString::Entry* e) const noexcept { return e->hash; }
  std::size_t operator()(const Probe& p) const noexcept { return p.hash; }
};

struct EntryEq {
  using is_transparent = void;
  bool operator()(const InternedString::Entry* a, const InternedString::Entry* b) const noexcept {
    return a == b;
  }
  bool operator()(const Probe& p, const InternedString::Entry* e) const noexcept {
    return p.text == e->text;
  }
  bool operator()(const InternedString::Entry* e, const Probe& p) const noexcept {
    return p.text == e->text;
  }
};

struct Shard {
  std::mutex mu;
  std::unordered_set<InternedString::Entry*, EntryHash, EntryEq> entries;
};

// Decoder threads of several informers intern at once; shards keep them off one mutex.
constexpr std::size_t kShards = 32;

struct Pool {
  std::array<Shard, kShards> shards;
  Shard& shard(std::size_t hash) noexcept { return shards[(hash >> 7) % kShards]; }
};

Pool& pool() {
  // Never destroyed: values in static storage may be released during exit, after any
  // function-local static would be gone.
  static Pool* const p = new Pool;  // NOLINT(cppcoreguidelines-owning-memory): intentionally leaked
  return *p;
}

const std::string& empty_string() {
  static const std::string* const s = new std::string;  // NOLINT(cppcoreguidelines-owning-memory)
  return *s;
}

}  // namespace

InternedString::InternedString(std::string_view text) {
  if (text.empty()) return;
  const std::size_t hash = std::hash<std::string_view>{}(text);
  Shard& shard = pool().shard(hash);
  std::lock_guard lock(shard.mu);
  auto it = shard.entries.find(Probe{text, hash});
  if (it != shard.entries.end()) {
    (*it)->refs.fetch_add(1, std::memory_order_relaxed);
    entry_ = *it;
    return;
  }
  std::unique_ptr<Entry> e(new Entry{{1}, hash, std::string(text)});
  shard.entries.insert(e.get());  // may throw: e is still owned here
  entry_ = e.release();
}

InternedString InternedString::unpooled(std::string_view text) {
  InternedString s;
  if (text.empty()) return s;
  // NOLINTNEXTLINE(cppcoreguidelines-owning-memory): owned by its count, as pooled entries are
  s.entry_ = new Entry{{1}, 0, std::string(text), false};
  return s;
}

InternedString::InternedString(const InternedString& other) noexcept : entry_(other.entry_) {
  if (entry_ != nullptr) entry_->refs.fetch_add(1, std::memory_order_relaxed);
}

// Self-assignment is safe: the entry is read and counted before this one is released.
// NOLINTNEXTLINE(bugprone-unhandled-self-assignment): handled without a branch, see above
InternedString& InternedString::operator=(const InternedString& other) noexcept {
  Entry* e = other.entry_;  // read first: `other` may be *this
  if (e != nullptr) e->refs.fetch_add(1, std::memory_order_relaxed);
  release();
  entry_ = e;
  return *this;
}

InternedString& InternedString::operator=(InternedString&& other) noexcept {
  if (this != &other) {
    release();
    entry_ = other.entry_;
    other.entry_ = nullptr;
  }
  return *this;
}

void InternedString::release() noexcept {
  Entry* e = entry_;
  if (e == nullptr) return;
  entry_ = nullptr;
  if (!e->pooled) {
    // NOLINTNEXTLINE(cppcoreguidelines-owning-memory): the last holder frees it
    if (e->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete e;
    return;
  }
  std::uint64_t refs = e->refs.load(std::memory_order_relaxed);
  while (refs > 1) {
    if (e->refs.compare_exchange_weak(refs, refs - 1, std::memory_order_acq_rel,
                                      std::memory_order_relaxed)) {
      return;
    }
  }
  // Possibly the last holder: decide under the shard's mutex, so no lookup finds it meanwhile.
  Shard& shard = pool().shard(e->hash);
  {
    std::lock_guard lock(shard.mu);
    if (e->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    shard.entries.erase(e);
  }
  delete e;  // NOLINT(cppcoreguidelines-owning-memory): the pool's entries are owned by counts
}

const std::string& InternedString::str() const noexcept {
  return entry_ != nullptr ? entry_->text : empty_string();
}

std::size_t InternedString::pool_size() noexcept {
  std::size_t n = 0;
  for (Shard& shard : pool().shards) {
    std::lock_guard lock(shard.mu);
    n += shard.entries.size();
  }
  return n;
}

std::ostream& operator<<(std::ostream& os, const InternedString& s) { return os << s.view(); }

}  // namespace kinformer::client
