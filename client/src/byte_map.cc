#include "kinformer/client/byte_map.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <ostream>
#include <stdexcept>

#include "detail/sort_keep_last.h"

namespace kinformer::client {

namespace {

constexpr std::size_t kMaxBytes = std::numeric_limits<std::uint32_t>::max();

std::size_t words_for(std::size_t count, std::size_t bytes) {
  return 1 + 2 * count + (bytes + 3) / 4;
}

// One block for `entries` (sorted, keys unique), or nullptr when there is none.
template <typename Entries>
std::uint32_t* build(const Entries& entries) {
  if (entries.empty()) return nullptr;
  std::size_t bytes = 0;
  for (const auto& [k, v] : entries) bytes += k.size() + v.size();
  if (bytes > kMaxBytes || entries.size() > kMaxBytes) {
    throw std::length_error("ByteMap: keys and values beyond 4 GiB");
  }
  const std::size_t words = words_for(entries.size(), bytes);
  auto* block = new std::uint32_t[words];
  block[words - 1] = 0;  // the tail's padding, so that equal maps are equal blocks
  block[0] = static_cast<std::uint32_t>(entries.size());
  char* out = reinterpret_cast<char*>(block + 1 + 2 * entries.size());
  std::size_t at = 0;
  std::size_t i = 0;
  for (const auto& [k, v] : entries) {
    std::copy_n(k.data(), k.size(), out + at);
    at += k.size();
    block[1 + 2 * i] = static_cast<std::uint32_t>(at);
    std::copy_n(v.data(), v.size(), out + at);
    at += v.size();
    block[2 + 2 * i] = static_cast<std::uint32_t>(at);
    ++i;
  }
  return block;
}

}  // namespace

void wipe_values(std::vector<std::pair<std::string, std::string>>& entries) noexcept {
  for (auto& [k, v] : entries) {
    if (!v.empty()) OPENSSL_cleanse(v.data(), v.size());
  }
}

ByteMap::ByteMap(std::vector<std::pair<std::string, std::string>> entries) {
  try {
    std::vector<Entry> views(entries.begin(), entries.end());
    detail::sort_keep_last(views);  // only views move: the bytes are never copied on the way
    block_ = build(views);
  } catch (...) {
    wipe_values(entries);
    throw;
  }
  wipe_values(entries);  // every value, the repeated keys' too
}

ByteMap::ByteMap(std::initializer_list<Entry> entries) {
  std::vector<Entry> sorted(entries);
  detail::sort_keep_last(sorted);
  block_ = build(sorted);
}

ByteMap::ByteMap(const ByteMap& other) {
  if (other.block_ == nullptr) return;
  const std::size_t words = other.block_bytes() / 4;
  block_ = new std::uint32_t[words];
  std::memcpy(block_, other.block_, words * 4);
}

ByteMap& ByteMap::operator=(const ByteMap& other) {
  if (this != &other) *this = ByteMap(other);
  return *this;
}

ByteMap& ByteMap::operator=(ByteMap&& other) noexcept {
  if (this != &other) {
    release();
    block_ = other.block_;
    other.block_ = nullptr;
  }
  return *this;
}

void ByteMap::release() noexcept {
  if (block_ == nullptr) return;
  OPENSSL_cleanse(block_, block_bytes());
  delete[] block_;
  block_ = nullptr;
}

ByteMap::Entry ByteMap::operator[](std::size_t i) const noexcept {
  const char* b = bytes();
  const std::uint32_t start = i == 0 ? 0 : block_[2 * i];
  const std::uint32_t key_end = block_[1 + 2 * i];
  const std::uint32_t value_end = block_[2 + 2 * i];
  return {std::string_view(b + start, key_end - start),
          std::string_view(b + key_end, value_end - key_end)};
}

std::optional<std::string_view> ByteMap::find(std::string_view key) const noexcept {
  std::size_t lo = 0;
  std::size_t hi = size();
  while (lo < hi) {  // the first entry whose key is not less than `key`
    const std::size_t mid = lo + (hi - lo) / 2;
    if ((*this)[mid].first < key) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo == size()) return std::nullopt;
  const Entry e = (*this)[lo];
  if (e.first != key) return std::nullopt;
  return e.second;
}

std::size_t ByteMap::value_bytes() const noexcept {
  std::size_t n = 0;
  for (const auto& [k, v] : *this) n += v.size();
  return n;
}

std::size_t ByteMap::block_bytes() const noexcept {
  if (block_ == nullptr) return 0;
  const std::size_t count = block_[0];
  return words_for(count, block_[2 * count]) * 4;
}

bool operator==(const ByteMap& a, const ByteMap& b) noexcept {
  const std::size_t n = a.block_bytes();
  if (n != b.block_bytes()) return false;
  return n == 0 || std::memcmp(a.block_, b.block_, n) == 0;
}

std::ostream& operator<<(std::ostream& os, const ByteMap& map) {
  os << '{';
  bool first = true;
  for (const auto& [k, v] : map) {
    os << (first ? "" : ", ") << k;
    first = false;
  }
  return os << '}';
}

void PrintTo(const ByteMap& map, std::ostream* os) { *os << map; }

}  // namespace kinformer::client
