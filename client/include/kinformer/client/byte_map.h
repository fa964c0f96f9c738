#pragma once
// ByteMap: a Secret's data, every key and value in one heap block.
//
// A Secret's data is a handful of keys whose values are unique per object. As a vector of
// std::string pairs it costs a 64-byte pair per key, the vector's own block, and a block per
// value with its allocator overhead: about 250 bytes per Secret beyond the bytes themselves.
// A ByteMap is one pointer to one block (the keys' and values' end offsets, then their bytes),
// and the block is wiped before it is freed (best effort for the copies on the way: the decoders
// wipe their intermediate values, not the HTTP and JSON buffers the bytes came in).

#include <compare>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kinformer::client {

/// Bytes by key, sorted by key, immutable once built. Reads as a sorted range of
/// (key, value) string views that live as long as the map.
/// Thread-safety: as a `const std::vector`: any number of threads may read one map.
class ByteMap {
 public:
  using Entry = std::pair<std::string_view, std::string_view>;

  class iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using iterator_concept = std::random_access_iterator_tag;
    using value_type = Entry;
    using difference_type = std::ptrdiff_t;
    using reference = Entry;
    using pointer = void;

    iterator() noexcept = default;
    Entry operator*() const noexcept { return (*map_)[i_]; }
    Entry operator[](difference_type n) const noexcept {
      return (*map_)[i_ + static_cast<std::size_t>(n)];
    }
    iterator& operator++() noexcept {
      ++i_;
      return *this;
    }
    iterator operator++(int) noexcept { return {map_, i_++}; }
    iterator& operator--() noexcept {
      --i_;
      return *this;
    }
    iterator operator--(int) noexcept { return {map_, i_--}; }
    iterator& operator+=(difference_type n) noexcept {
      i_ += static_cast<std::size_t>(n);
      return *this;
    }
    iterator& operator-=(difference_type n) noexcept {
      i_ -= static_cast<std::size_t>(n);
      return *this;
    }
    friend iterator operator+(iterator it, difference_type n) noexcept { return it += n; }
    friend iterator operator+(difference_type n, iterator it) noexcept { return it += n; }
    friend iterator operator-(iterator it, difference_type n) noexcept { return it -= n; }
    friend difference_type operator-(const iterator& a, const iterator& b) noexcept {
      return static_cast<difference_type>(a.i_) - static_cast<difference_type>(b.i_);
    }
    friend bool operator==(const iterator& a, const iterator& b) noexcept { return a.i_ == b.i_; }
    friend auto operator<=>(const iterator& a, const iterator& b) noexcept { return a.i_ <=> b.i_; }

   private:
    friend class ByteMap;
    iterator(const ByteMap* map, std::size_t i) noexcept : map_(map), i_(i) {}
    const ByteMap* map_ = nullptr;
    std::size_t i_ = 0;
  };
  using const_iterator = iterator;

  ByteMap() noexcept = default;
  /// Sorts by key; of equal keys the last one wins (as Go reads a JSON object or a protobuf map
  /// that repeats a key). The given values are wiped once copied (those of the vector passed:
  /// move it in). Throws std::length_error when the keys and values together exceed 4 GiB.
  explicit ByteMap(std::vector<std::pair<std::string, std::string>> entries);
  ByteMap(std::initializer_list<Entry> entries);
  ByteMap(const ByteMap& other);
  ByteMap(ByteMap&& other) noexcept : block_(other.block_) { other.block_ = nullptr; }
  ByteMap& operator=(const ByteMap& other);
  ByteMap& operator=(ByteMap&& other) noexcept;
  ~ByteMap() { release(); }

  [[nodiscard]] std::size_t size() const noexcept { return block_ ? block_[0] : 0; }
  [[nodiscard]] bool empty() const noexcept { return block_ == nullptr; }
  /// The i-th entry in key order; i < size().
  Entry operator[](std::size_t i) const noexcept;
  [[nodiscard]] iterator begin() const noexcept { return {this, 0}; }
  [[nodiscard]] iterator end() const noexcept { return {this, size()}; }
  /// The value of `key`; nullopt when absent. The view lives as long as the map.
  [[nodiscard]] std::optional<std::string_view> find(std::string_view key) const noexcept;
  /// Sum of the values' sizes (the Secret's data bytes).
  [[nodiscard]] std::size_t value_bytes() const noexcept;
  /// The heap block's size in bytes (0 when empty).
  [[nodiscard]] std::size_t block_bytes() const noexcept;

  friend bool operator==(const ByteMap& a, const ByteMap& b) noexcept;

 private:
  void release() noexcept;
  [[nodiscard]] const char* bytes() const noexcept {
    return reinterpret_cast<const char*>(block_ + 1 + 2 * std::size_t{block_[0]});
  }
  // [count][key end, value end] * count, then the keys' and values' bytes, key then value in
  // key order; ends are offsets into the bytes. nullptr when there is no entry.
  std::uint32_t* block_ = nullptr;
};

/// Wipes the values of `entries`: decoded Secret bytes that are not, or not yet, in a ByteMap
/// (a decode that failed half-way). The decoders do; the network buffers the bytes were read
/// from are not wiped.
void wipe_values(std::vector<std::pair<std::string, std::string>>& entries) noexcept;

/// Prints the keys only, never a value: "{tls.crt, tls.key}" (Secret data is never logged).
std::ostream& operator<<(std::ostream& os, const ByteMap& map);
/// The same for GoogleTest, which would otherwise print the values of a range.
void PrintTo(const ByteMap& map, std::ostream* os);

}  // namespace kinformer::client
