#include "kinformer/client/pager.h"

#include <iterator>
#include <string>

namespace kinformer::client {

ListPager::ListPager(ListPageFn fetch, ListPagerOptions options)
    : fetch_(std::move(fetch)), options_(std::move(options)) {}

Result<ObjectList> ListPager::list(ListOptions options) {
  ListOptions first = std::move(options);
  first.continue_token.clear();
  int restarts = 0;
  ObjectList all;
  ListOptions page = first;
  std::size_t pages = 0;  // of this pass
  for (;;) {
    if (++pages > options_.max_pages) {
      return Error::make(Errc::too_large,
                         "list: more than max_pages (" + std::to_string(options_.max_pages) +
                             ") pages; the server keeps handing out continue tokens");
    }
    auto r = fetch_(page);
    if (!r) {
      const Error& e = r.error();
      if (e.is_expired() && !page.continue_token.empty() &&
          restarts < options_.restarts_on_expired_continue) {
        // The continue token expired: relist from scratch (a consistent snapshot).
        ++restarts;
        all = ObjectList{};
        pages = 0;
        page = first;
        page.resource_version.reset();
        page.resource_version_match.clear();
        continue;
      }
      if (options_.restart) {
        if (auto again = options_.restart(e, page)) {
          all = ObjectList{};
          pages = 0;
          first = std::move(*again);
          first.continue_token.clear();
          page = first;
          continue;
        }
      }
      return r;
    }
    ObjectList& got = r.value();
    if (all.items.empty()) {
      all.items = std::move(got.items);
    } else {
      all.items.insert(all.items.end(), std::make_move_iterator(got.items.begin()),
                       std::make_move_iterator(got.items.end()));
    }
    all.resource_version = std::move(got.resource_version);
    if (got.continue_token.empty()) return all;
    if (got.continue_token == page.continue_token) {
      // The token is not quoted: it is long, and opaque to anyone reading the message.
      return Error::make(Errc::decode, "list page " + std::to_string(pages) +
                                           " returned the continue token it was asked with: the "
                                           "list makes no progress (a proxy dropping the "
                                           "continue parameter?)");
    }
    page.continue_token = std::move(got.continue_token);
    page.resource_version.reset();
    page.resource_version_match.clear();
  }
}

}  // namespace kinformer::client
