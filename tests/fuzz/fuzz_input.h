#pragma once
// A cursor over a libFuzzer input: takes small numbers for choices, the rest as bytes.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kinformer::fuzz {

class Input {
 public:
  Input(const std::uint8_t* data, std::size_t size)
      : data_(reinterpret_cast<const char*>(data)), size_(size) {}
  /// The next byte, or 0 when the input is used up.
  std::uint8_t byte() { return pos_ < size_ ? static_cast<std::uint8_t>(data_[pos_++]) : 0; }
  /// Everything not taken yet.
  std::string_view rest() {
    std::string_view r(data_ + pos_, size_ - pos_);
    pos_ = size_;
    return r;
  }

 private:
  const char* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

}  // namespace kinformer::fuzz
