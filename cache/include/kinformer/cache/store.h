#pragma once
// Store: the thread-safe, indexed cache of one informer (client-go's Indexer).

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kinformer/cache/label_selector.h"
#include "kinformer/cache/shared_mutex.h"
#include "kinformer/client/object.h"

namespace kinformer::cache {

/// What a write did to the store. `old_object` is the previous state (updated/deleted),
/// `object` the new state (added/updated) or, for deletions, the state being removed.
struct StoreChange {
  enum class Type { added, updated, deleted };
  Type type = Type::added;
  client::ObjectPtr old_object;
  client::ObjectPtr object;
};

/// A thread-safe map from Object::key() to immutable objects, with a built-in namespace index,
/// label-selector queries and custom indexes.
///
/// Thread-safety: thread-safe; no concurrent call causes a data race. Writes take an exclusive
/// lock, reads a shared lock (a WriterPreferringMutex: readers never starve the informer's
/// writes, so a callback under the shared lock must not call into the store). Readers receive
/// client::ObjectPtr (shared_ptr<const Object>): objects are never copied, and an object stays
/// valid for as long as the reader holds its pointer, even after the store replaced or deleted it.
/// Index functions run under the exclusive lock: they must be fast, must not throw and must not
/// call back into the store.
class Store {
 public:
  /// Returns the index values of an object (e.g. the names of Secrets a Pod mounts).
  /// Must be a pure function of the object: the values it returns when an object is removed or
  /// replaced must be the values it returned when that object was added (the index refers to
  /// the store's entries, and a value it cannot find again would keep a removed entry).
  using IndexFunc = std::function<std::vector<std::string>(const client::Object&)>;

  /// Name of the built-in namespace index (value: metadata.namespace_).
  static constexpr std::string_view kNamespaceIndex = "namespace";

  Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  /// Adds or replaces the object under its key. Returns the change (added or updated).
  StoreChange upsert(client::ObjectPtr object);
  /// Removes the object with `key`; returns the deletion (carrying the removed state) or
  /// std::nullopt when absent.
  std::optional<StoreChange> remove(std::string_view key);
  /// Replaces the whole contents with `items` (a relist) and records `resource_version`.
  /// Returns every change: additions, updates (for keys present before and after, even when the
  /// object is identical) and deletions of every key absent from `items` (the deletion carries
  /// the last known state, for tombstones). Items with duplicate keys: the last wins.
  std::vector<StoreChange> replace(std::vector<client::ObjectPtr> items,
                                   std::string resource_version);

  [[nodiscard]] client::ObjectPtr get(std::string_view key) const;
  [[nodiscard]] std::vector<client::ObjectPtr> list() const;
  [[nodiscard]] std::vector<std::string> keys() const;
  [[nodiscard]] std::vector<client::ObjectPtr> list_namespace(std::string_view ns) const;
  [[nodiscard]] std::vector<client::ObjectPtr> list(const LabelSelector& selector) const;
  /// Objects in `ns` (all namespaces if empty) matching `selector`.
  [[nodiscard]] std::vector<client::ObjectPtr> list(std::string_view ns,
                                                    const LabelSelector& selector) const;
  /// Calls `fn` for each object under the shared lock (no vector is built). `fn` must not call
  /// back into this store, not even to read (see WriterPreferringMutex).
  void for_each(const std::function<void(const client::ObjectPtr&)>& fn) const;

  /// Adds an index; the existing contents are indexed immediately. May be called at any time.
  /// Throws client::ConfigError if an index with that name exists.
  void add_index(std::string name, IndexFunc fn);
  [[nodiscard]] bool has_index(std::string_view name) const;
  /// Objects whose index `name` contains `value`. Throws client::ConfigError for an unknown index.
  [[nodiscard]] std::vector<client::ObjectPtr> by_index(std::string_view name,
                                                        std::string_view value) const;
  /// The values of index `name` that have at least one object.
  [[nodiscard]] std::vector<std::string> index_values(std::string_view name) const;

  [[nodiscard]] std::size_t size() const;
  /// resourceVersion recorded by the last replace() (or set_resource_version()).
  [[nodiscard]] std::string resource_version() const;
  void set_resource_version(std::string resource_version);

 private:
  // One entry per object, found by its key without storing it: hash and equality read the
  // object's namespace and name, and a key string is looked up as is (heterogeneous lookup).
  // The object is replaced in place on an update (same key, so the same hash and bucket).
  struct Item {
    mutable client::ObjectPtr object;
  };
  struct ItemHash {
    using is_transparent = void;
    std::size_t operator()(const Item& item) const noexcept;
    std::size_t operator()(std::string_view key) const noexcept;
  };
  struct ItemEq {
    using is_transparent = void;
    bool operator()(const Item& a, const Item& b) const noexcept;
    bool operator()(std::string_view key, const Item& item) const noexcept;
    bool operator()(const Item& item, std::string_view key) const noexcept {
      return (*this)(key, item);
    }
  };
  using Items = std::unordered_set<Item, ItemHash, ItemEq>;
  struct Index {
    IndexFunc fn;
    // Index value -> the items_ entries that have it. Entries of a node-based map keep their
    // address until erased, so the index holds pointers, not a second copy of every key.
    std::unordered_map<std::string, std::unordered_set<const Item*>> values;
  };
  // `object`: the object whose index values are added or removed (on an update, the old one is
  // removed while `item` already holds the new one).
  void index_insert(const Item& item, const client::Object& object);  // mu_ held
  void index_erase(const Item& item, const client::Object& object);   // mu_ held
  const Index& find_index(std::string_view name) const;               // mu_ held

  mutable WriterPreferringMutex mu_;
  Items items_;                                        // guarded by mu_
  std::map<std::string, Index, std::less<>> indexes_;  // guarded by mu_
  std::string resource_version_;                       // guarded by mu_
};

using StorePtr = std::shared_ptr<Store>;
/// client-go's name for an indexed store.
using Indexer = Store;

}  // namespace kinformer::cache
