#include "kinformer/client/rest_client.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <cctype>
#include <deque>
#include <exception>
#include <optional>
#include <set>
#include <stop_token>

#include "detail/json.h"
#include "kinformer/client/api_error.h"
#include "kinformer/client/list_decoder.h"
#include "kinformer/client/pager.h"
#include "kinformer/client/protobuf_list_decoder.h"
#include "protobuf/negotiation.h"
#include "transport.h"

namespace kinformer::client {

namespace {

bool unreserved(unsigned char c) {
  return std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~';
}

void append_param(std::string& q, std::string_view key, std::string_view value) {
  static const char* hex = "0123456789ABCDEF";
  if (!q.empty()) q.push_back('&');
  q.append(key).push_back('=');
  for (unsigned char c : value) {
    if (unreserved(c)) {
      q.push_back(static_cast<char>(c));
    } else {
      q.push_back('%');
      q.push_back(hex[c >> 4]);
      q.push_back(hex[c & 15]);
    }
  }
}

std::string find_header(const std::vector<std::pair<std::string, std::string>>& headers,
                        std::string_view name) {
  for (const auto& [k, v] : headers) {
    if (k.size() == name.size() && std::equal(k.begin(), k.end(), name.begin(), [](char a, char b) {
          return std::tolower(a) == std::tolower(b);
        })) {
      return v;
    }
  }
  return {};
}

const char* patch_content_type(PatchType t) {
  switch (t) {
    case PatchType::merge:
      return "application/merge-patch+json";
    case PatchType::json:
      return "application/json-patch+json";
    case PatchType::strategic_merge:
      return "application/strategic-merge-patch+json";
  }
  return "application/merge-patch+json";
}

}  // namespace

std::string list_query(const ListOptions& o, bool watch) {
  std::string q;
  if (watch) append_param(q, "watch", "1");
  if (!o.label_selector.empty()) append_param(q, "labelSelector", o.label_selector);
  if (!o.field_selector.empty()) append_param(q, "fieldSelector", o.field_selector);
  if (o.resource_version) append_param(q, "resourceVersion", *o.resource_version);
  if (!o.resource_version_match.empty()) {
    append_param(q, "resourceVersionMatch", o.resource_version_match);
  }
  if (o.limit > 0) append_param(q, "limit", std::to_string(o.limit));
  if (!o.continue_token.empty()) append_param(q, "continue", o.continue_token);
  if (watch) {
    if (o.allow_watch_bookmarks) append_param(q, "allowWatchBookmarks", "true");
    if (o.timeout_seconds > 0) append_param(q, "timeoutSeconds", std::to_string(o.timeout_seconds));
    if (o.send_initial_events) append_param(q, "sendInitialEvents", "true");
  }
  return q;
}

std::string parse_warning_header(std::string_view value) {
  // warn-code SP warn-agent SP "warn-text" [SP warn-date]
  auto open = value.find('"');
  if (open == std::string_view::npos) return std::string(value);
  std::string out;
  for (std::size_t i = open + 1; i < value.size(); ++i) {
    if (value[i] == '\\' && i + 1 < value.size()) {
      out.push_back(value[++i]);
    } else if (value[i] == '"') {
      return out;
    } else {
      out.push_back(value[i]);
    }
  }
  return std::string(value);
}

std::string RawResponse::header(std::string_view name) const { return find_header(headers, name); }

struct RestClient::Impl {
  ClusterConfig config;
  RestClientOptions options;
  Logger log;
  std::shared_ptr<RateLimiter> limiter;
  std::shared_ptr<detail::Transport> transport;
  std::stop_source stop;  // shutdown()

  static Error shut_down() { return Error::make(Errc::cancelled, "client is shut down"); }

  // The distinct warnings remembered, oldest first, and the same as a set: at most
  // options.max_remembered_warnings (get_raw keys them by path, so they would grow forever).
  mutable std::mutex warn_mu;
  std::set<std::pair<std::string, std::string>> warned;
  std::deque<ApiWarning> warnings;

  void record_warnings(const std::string& resource,
                       const std::vector<std::pair<std::string, std::string>>& headers) {
    for (const auto& [k, v] : headers) {
      if (k.size() != 7 || !std::equal(k.begin(), k.end(), "warning",
                                       [](char a, char b) { return std::tolower(a) == b; })) {
        continue;
      }
      ApiWarning w{resource, parse_warning_header(v)};
      {
        std::lock_guard lock(warn_mu);
        if (!warned.emplace(w.resource, w.message).second) continue;
        warnings.push_back(w);
        while (warnings.size() > std::max<std::size_t>(options.max_remembered_warnings, 1)) {
          warned.erase({warnings.front().resource, warnings.front().message});
          warnings.pop_front();
        }
      }
      if (options.on_warning) {
        options.on_warning(w);
      } else {
        log.warn("the API server sent a warning",
                 {{"resource", w.resource}, {"warning", w.message}});
      }
    }
  }

  Result<Credentials> credentials() {
    if (!config.credentials) return Credentials{};
    return config.credentials->current();
  }

  /// After a 401 with `used`: drops the provider's cached credentials (re-reads a token file,
  /// re-runs an exec plugin) and tells whether the fresh ones differ, i.e. whether a retry can
  /// succeed. The same credentials would get the same 401 (a static token, a token file nobody
  /// rotated, a revoked token the plugin hands out again): retrying them would only double the
  /// requests of a client whose credentials are rejected. A provider that now fails (unreadable
  /// file) counts as changed: the retry reports that error.
  bool refreshed(const Credentials& used) {
    config.credentials->invalidate();
    auto fresh = config.credentials->current();
    if (!fresh) return true;
    return fresh->token != used.token || fresh->client_cert_pem != used.client_cert_pem ||
           fresh->client_key_pem != used.client_key_pem;
  }

  /// One request with rate limiting, warnings and a single retry after 401 with fresh credentials
  /// (only when they differ from the rejected ones: see refreshed()).
  /// Waits for the rate limiter until a token, shutdown() or a stop request of `caller`.
  Status acquire(const std::stop_token& caller) {
    if (!caller.stop_possible()) return limiter->acquire(stop.get_token());
    std::stop_source either;
    std::stop_callback on_shutdown(stop.get_token(), [&] { either.request_stop(); });
    std::stop_callback on_caller(caller, [&] { either.request_stop(); });
    return limiter->acquire(either.get_token());
  }

  /// `caller` (ListOptions::stop) also ends a wait for the rate limiter.
  /// `sink` (may be null) receives a 2xx body it accepts (detail::BodySink); a 401 and any other
  /// error response are buffered, so the retry below never follows a streamed body.
  Result<detail::HttpResponse> send(const detail::HttpRequest& request, const std::string& resource,
                                    bool limited = true, const std::stop_token& caller = {},
                                    const detail::BodySink* sink = nullptr) {
    for (int attempt = 0;; ++attempt) {
      if (stop.stop_requested()) return shut_down();
      if (limited) {
        if (auto s = acquire(caller); !s) return std::move(s).error();
      }
      auto creds = credentials();
      if (!creds) return std::move(creds).error();
      auto response = transport->request(request, creds.value(), sink);
      if (!response) return response;
      record_warnings(resource, response->headers);
      if (response->status == 401 && attempt == 0 && config.credentials) {
        if (!refreshed(creds.value())) return response;
        continue;
      }
      return response;
    }
  }

  static Error to_error(const detail::HttpResponse& r) {
    return error_from_response(r.status, r.body, find_header(r.headers, "Retry-After"));
  }

  static Result<ObjectPtr> decode_object(const ResourceType& type, detail::HttpResponse& r) {
    rapidjson::Document doc;
    if (auto e = detail::parse_insitu(doc, r.body.data(), r.body.size())) {
      return Error::make(Errc::decode, type.gvr.to_string() + ": response is not valid JSON: " +
                                           e->reason + " at byte " + std::to_string(e->offset));
    }
    if (!doc.IsObject()) {
      return Error::make(Errc::decode, type.gvr.to_string() + ": response is not a JSON object");
    }
    auto obj = type.codec->decode(doc);
    if (!obj) return std::move(obj).error();
    return ObjectPtr(std::move(obj).value());
  }

  Result<ObjectPtr> object_call(const ResourceType& type, const detail::HttpRequest& request) {
    auto r = send(request, type.gvr.to_string());
    if (!r) return std::move(r).error();
    if (r->status < 200 || r->status >= 300) return to_error(r.value());
    return decode_object(type, r.value());
  }

  // The protobuf codec when lists and watches of `type` ask for protobuf (nullptr: JSON only).
  ProtobufCodecPtr protobuf_for(const ResourceType& type) const {
    return options.protobuf ? protobuf_codec(type) : nullptr;
  }

  Result<WatchStreamPtr> open_watch(const ResourceType& type, std::string_view ns,
                                    const ListOptions& options) {
    detail::HttpRequest req;
    req.target = type.gvr.path(ns) + "?" + list_query(options, true);
    req.idle_timeout = options.idle_timeout;
    if (protobuf_for(type)) req.accept = detail::pb::kWatchAccept;  // decoded by Content-Type
    std::string resource = type.gvr.to_string();
    for (int attempt = 0;; ++attempt) {
      if (stop.stop_requested()) return shut_down();
      auto creds = credentials();
      if (!creds) return std::move(creds).error();
      auto stream = transport->watch(
          req, creds.value(), type.codec,
          [&](const detail::HttpResponse& head) { record_warnings(resource, head.headers); });
      if (!stream && stream.error().http_status == 401 && attempt == 0 && config.credentials) {
        if (!refreshed(creds.value())) return stream;
        continue;
      }
      return stream;
    }
  }

  // The body of a 200 list response is decoded as it arrives (list_decoder.h,
  // protobuf_list_decoder.h), by the encoding its Content-Type names: the server chose between
  // protobuf and JSON, and says so in the head, before the first body byte. Error responses
  // are buffered and mapped as before.
  Result<ObjectList> list(const ResourceType& type, std::string_view ns,
                          const ListOptions& options) {
    detail::HttpRequest req;
    std::string q = list_query(options, false);
    req.target = type.gvr.path(ns) + (q.empty() ? "" : "?" + q);
    ProtobufCodecPtr protobuf = protobuf_for(type);
    if (protobuf) req.accept = detail::pb::kListAccept;
    // Used on the io thread while send() waits (detail::BodySink): no lock needed.
    std::optional<JsonListDecoder> json;
    std::optional<ProtobufListDecoder> pb;
    const std::size_t max_item = this->options.max_list_item_bytes;
    detail::BodySink sink;
    sink.accept = [&](const detail::HttpResponse& head) {
      if (head.status != 200) return false;  // mapped to an error below, as before
      json.reset();
      pb.reset();
      if (protobuf && detail::pb::is_protobuf(find_header(head.headers, "Content-Type"))) {
        pb.emplace(protobuf, ProtobufListDecoder::Options{max_item});
      } else {
        json.emplace(type, JsonListDecoder::Options{max_item});
      }
      return true;
    };
    sink.piece = [&](std::string_view piece) { return pb ? pb->feed(piece) : json->feed(piece); };
    auto r = send(req, type.gvr.to_string(), true, options.stop, &sink);
    if (!r) return std::move(r).error();
    if (r->body_streamed) {
      // finish() can still decode an item (a number that ends the body): an exception there is
      // a decode error too, as one from the sink during the body (detail::BodySink).
      try {
        return pb ? pb->finish() : json->finish();
      } catch (const std::exception& e) {
        return Error::make(
            Errc::decode,
            type.gvr.to_string() + ": decoding the list response threw at its end: " + e.what());
      }
    }
    if (protobuf) {
      return error_from_protobuf_response(r->status, r->body,
                                          find_header(r->headers, "Retry-After"));
    }
    return to_error(r.value());
  }
};

RestClient::RestClient(ClusterConfig config, RestClientOptions options)
    : impl_(std::make_shared<Impl>()) {
  impl_->config = std::move(config);
  impl_->options = std::move(options);
  // Server warnings are de-duplicated before they are logged, but a pair forgotten past
  // max_remembered_warnings (or get_raw's per-path keys) comes back: a generous limit keeps the
  // distinct warnings of a start-up while bounding a flood.
  impl_->log = Logger(impl_->options.log, "client", {{"server", impl_->config.server}},
                      LogRateLimit{100, std::chrono::seconds(1)});
  impl_->limiter = impl_->options.rate_limiter
                       ? impl_->options.rate_limiter
                       : std::make_shared<RateLimiter>(impl_->options.rate_limit);
  detail::TransportOptions t;
  t.user_agent = impl_->options.user_agent;
  t.request_timeout = impl_->options.request_timeout;
  t.max_idle_connections = impl_->options.max_idle_connections;
  t.idle_connection_timeout = impl_->options.idle_connection_timeout;
  t.clock = impl_->options.clock;
  t.max_response_bytes = impl_->options.max_response_bytes;
  t.max_watch_event_bytes = impl_->options.max_watch_event_bytes;
  t.watch_queue_limit = impl_->options.watch_queue_limit;
  t.watch_queue_bytes_limit = impl_->options.watch_queue_bytes_limit;
  t.watch_idle_timeout = impl_->options.watch_idle_timeout;
  t.accept_gzip = impl_->options.gzip;
  t.http2 = impl_->options.http2;
  t.http2_read_idle_timeout = impl_->options.http2_read_idle_timeout;
  t.http2_ping_timeout = impl_->options.http2_ping_timeout;
  t.runtime = impl_->options.runtime;
  impl_->transport = detail::Transport::create(impl_->config, std::move(t));
}

RestClient::~RestClient() = default;

const ClusterConfig& RestClient::config() const { return impl_->config; }

void RestClient::shutdown() { impl_->stop.request_stop(); }

std::vector<ApiWarning> RestClient::warnings() const {
  std::lock_guard lock(impl_->warn_mu);
  return {impl_->warnings.begin(), impl_->warnings.end()};
}

Result<ObjectPtr> RestClient::get(const ResourceType& type, std::string_view ns,
                                  std::string_view name) {
  detail::HttpRequest req;
  req.target = type.gvr.path(ns, name);
  return impl_->object_call(type, req);
}

Result<ObjectList> RestClient::list(const ResourceType& type, std::string_view ns,
                                    const ListOptions& options) {
  return impl_->list(type, ns, options);
}

Result<ObjectList> RestClient::list_all(const ResourceType& type, std::string_view ns,
                                        ListOptions options) {
  if (options.limit <= 0) options.limit = 500;
  ListPager pager([&](const ListOptions& page) { return impl_->list(type, ns, page); });
  return pager.list(std::move(options));
}

Result<ObjectPtr> RestClient::create(const ResourceType& type, const Object& object) {
  detail::HttpRequest req;
  req.method = "POST";
  req.target = type.gvr.path(object.metadata.namespace_);
  req.body = type.codec->encode(object);
  req.content_type = "application/json";
  return impl_->object_call(type, req);
}

Result<ObjectPtr> RestClient::update(const ResourceType& type, const Object& object) {
  detail::HttpRequest req;
  req.method = "PUT";
  req.target = type.gvr.path(object.metadata.namespace_, object.metadata.name);
  req.body = type.codec->encode(object);
  req.content_type = "application/json";
  return impl_->object_call(type, req);
}

Result<ObjectPtr> RestClient::patch(const ResourceType& type, std::string_view ns,
                                    std::string_view name, PatchType patch_type,
                                    std::string_view patch) {
  detail::HttpRequest req;
  req.method = "PATCH";
  req.target = type.gvr.path(ns, name);
  req.body = std::string(patch);
  req.content_type = patch_content_type(patch_type);
  return impl_->object_call(type, req);
}

Status RestClient::delete_(const ResourceType& type, std::string_view ns, std::string_view name) {
  detail::HttpRequest req;
  req.method = "DELETE";
  req.target = type.gvr.path(ns, name);
  auto r = impl_->send(req, type.gvr.to_string());
  if (!r) return std::move(r).error();
  if (r->status < 200 || r->status >= 300) return Impl::to_error(r.value());
  return Ok{};
}

Result<RawResponse> RestClient::get_raw(std::string_view path_and_query) {
  detail::HttpRequest req;
  req.target = std::string(path_and_query);
  req.accept = "*/*";
  std::string resource(path_and_query.substr(0, path_and_query.find('?')));
  auto r = impl_->send(req, resource);
  if (!r) return std::move(r).error();
  RawResponse out;
  out.status = r->status;
  out.body = std::move(r->body);
  out.content_encoding = std::move(r->content_encoding);
  out.headers = std::move(r->headers);
  return out;
}

Result<WatchStreamPtr> RestClient::watch(const ResourceType& type, std::string_view ns,
                                         const ListOptions& options) {
  return impl_->open_watch(type, ns, options);
}

namespace {

class RestListerWatcher final : public ListerWatcher {
 public:
  RestListerWatcher(std::shared_ptr<RestClient::Impl> impl, ResourceType type, std::string ns)
      : impl_(std::move(impl)), type_(std::move(type)), ns_(std::move(ns)) {}

  Result<ObjectList> list(const ListOptions& options) override {
    return impl_->list(type_, ns_, options);
  }
  Result<WatchStreamPtr> watch(const ListOptions& options) override {
    return impl_->open_watch(type_, ns_, options);
  }

 private:
  std::shared_ptr<RestClient::Impl> impl_;  // keeps the transport (io thread) alive
  ResourceType type_;
  std::string ns_;
};

}  // namespace

ListerWatcherPtr RestClient::lister_watcher(ResourceType type, std::string ns) {
  return std::make_unique<RestListerWatcher>(impl_, std::move(type), std::move(ns));
}

}  // namespace kinformer::client
