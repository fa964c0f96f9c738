#pragma once
// discovery.k8s.io/v1 EndpointSlice: the primary endpoint source (core/v1 Endpoints is
// deprecated since Kubernetes 1.33).

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kinformer/client/object.h"
#include "kinformer/client/resource.h"

namespace kinformer::client {

/// An endpoint's addresses in 24 bytes: each address after its length (a LEB128 varint), kept
/// in the object itself up to 23 bytes (one IPv4 or a short IPv6 address), else in one heap
/// block. The API allows 1-100 addresses and consumers use the first; a
/// std::vector<std::string> of one address is 24 bytes plus a 48-byte heap block. Reads as a
/// range of std::string_view. Thread-safety: as a std::string.
class AddressList {
 public:
  class iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using iterator_concept = std::forward_iterator_tag;
    using value_type = std::string_view;
    using difference_type = std::ptrdiff_t;
    using reference = std::string_view;
    using pointer = void;

    iterator() noexcept = default;
    std::string_view operator*() const noexcept { return current_; }
    iterator& operator++() noexcept {
      at_ = next_;
      read();
      return *this;
    }
    iterator operator++(int) noexcept {
      iterator old = *this;
      ++*this;
      return old;
    }
    friend bool operator==(const iterator& a, const iterator& b) noexcept { return a.at_ == b.at_; }

   private:
    friend class AddressList;
    iterator(std::string_view packed, std::size_t at) noexcept : packed_(packed), at_(at) {
      read();
    }
    void read() noexcept;
    std::string_view packed_;
    std::size_t at_ = 0;
    std::size_t next_ = 0;
    std::string_view current_;
  };
  using const_iterator = iterator;

  AddressList() noexcept = default;
  AddressList(std::initializer_list<std::string_view> addresses);
  AddressList(const AddressList& other) { assign(other.packed()); }
  AddressList(AddressList&& other) noexcept;
  AddressList& operator=(const AddressList& other);
  AddressList& operator=(AddressList&& other) noexcept;
  ~AddressList() { clear(); }

  void push_back(std::string_view address);
  void clear() noexcept;

  [[nodiscard]] bool empty() const noexcept { return packed().empty(); }
  [[nodiscard]] std::size_t size() const noexcept;
  /// The i-th address; i < size() (a walk over the ones before it).
  std::string_view operator[](std::size_t i) const noexcept;
  /// The first address; !empty().
  [[nodiscard]] std::string_view front() const noexcept { return *begin(); }
  [[nodiscard]] iterator begin() const noexcept { return {packed(), 0}; }
  [[nodiscard]] iterator end() const noexcept { return {packed(), packed().size()}; }
  [[nodiscard]] std::vector<std::string> to_vector() const;

  friend bool operator==(const AddressList& a, const AddressList& b) noexcept {
    return a.packed() == b.packed();
  }

 private:
  // Up to kInline packed bytes live in buf_, their count in buf_[kInline]; more live in a heap
  // block whose address and size are in buf_, and buf_[kInline] is kOnHeap.
  static constexpr std::size_t kInline = 23;
  static constexpr unsigned char kOnHeap = 0xff;
  [[nodiscard]] std::string_view packed() const noexcept;
  // Replaces the bytes with `packed` (which must not point into this list); unchanged if the
  // allocation throws.
  void assign(std::string_view packed);

  alignas(8) unsigned char buf_[kInline + 1] = {};
};

std::ostream& operator<<(std::ostream& os, const AddressList& addresses);

/// One endpoint of a slice. Unset conditions mean "unknown" (the API treats unknown ready as
/// ready).
struct SliceEndpoint {
  AddressList addresses;
  std::optional<bool> ready;
  std::optional<bool> serving;
  std::optional<bool> terminating;
  InternedString hostname;
  InternedString node_name;
  InternedString zone;
  std::optional<ObjectReference> target_ref;
  bool operator==(const SliceEndpoint&) const = default;
};

struct SlicePort {
  InternedString name;
  std::optional<std::int32_t> port;  ///< unset = all ports
  InternedString protocol;           ///< "TCP" when unset by the server
  InternedString app_protocol;
  bool operator==(const SlicePort&) const = default;
};

/// Thread-safety: immutable once stored.
class EndpointSlice final : public Object {
 public:
  InternedString address_type;  ///< "IPv4", "IPv6" or "FQDN"
  std::vector<SliceEndpoint> endpoints;
  std::vector<SlicePort> ports;
  /// The owning Service: label kubernetes.io/service-name ("" when absent).
  [[nodiscard]] std::string service_name() const;
};

template <>
struct ResourceTraits<EndpointSlice> {
  static const ResourceType& type();
};

}  // namespace kinformer::client
