#pragma once
// ListPager: one list, page by page (client-go's tools/pager), shared by RestClient::list_all and
// the informer's Reflector.

#include <cstddef>
#include <functional>
#include <optional>

#include "kinformer/client/error.h"
#include "kinformer/client/result.h"
#include "kinformer/client/watch.h"

namespace kinformer::client {

/// Fetches one page of a list with the given options (limit, continue token).
using ListPageFn = std::function<Result<ObjectList>(const ListOptions& page)>;

struct ListPagerOptions {
  /// An expired continue token (410 on a continuation page) restarts the whole list, from its
  /// first page at an unset resourceVersion (a consistent read), up to this many times; the
  /// next expiry is returned. 0: every expiry is returned (the caller relists on its own terms).
  int restarts_on_expired_continue = 1;
  /// Optional: given a failed page's error and options, the options to restart the whole list
  /// with (from its first page; what was gathered so far is dropped), or nullopt to return the
  /// error. Asked after the expired-continue rule above. It must stop restarting eventually:
  /// return nullopt for the options it gave.
  std::function<std::optional<ListOptions>(const Error& error, const ListOptions& page)> restart;
  /// Pages one pass of the list may take (a restart starts counting again); one more is
  /// Errc::too_large. A server or proxy that hands out new continue tokens without end would
  /// otherwise grow the list until memory runs out. 100,000 pages of 500 is 50 million objects.
  std::size_t max_pages = 100'000;
};

/// Lists every page: the first with the caller's options (without a continue token), each next
/// one with the previous page's continue token and without resourceVersion and
/// resourceVersionMatch (together with continue they are a 400: the token pins the snapshot).
/// The items come back in order with the last page's resourceVersion; pages are moved in, never
/// copied, so the list is held once. A page that returns the continue token it was asked with
/// makes no progress (a proxy dropping the continue parameter would repeat the first page
/// forever): Errc::decode.
///
/// Not thread-safe: one list() at a time; `fetch` is called on the calling thread.
class ListPager {
 public:
  explicit ListPager(ListPageFn fetch, ListPagerOptions options = {});

  /// The whole list, or the first error no rule restarts on.
  Result<ObjectList> list(ListOptions options);

 private:
  ListPageFn fetch_;
  ListPagerOptions options_;
};

}  // namespace kinformer::client
