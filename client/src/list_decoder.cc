#include "kinformer/client/list_decoder.h"

#include <rapidjson/error/en.h>

#include "detail/json.h"

namespace kinformer::client {
namespace {

// RapidJSON's whitespace (RFC 8259), the only bytes skipped between tokens.
bool whitespace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Ends a number or literal: what RapidJSON stops at after one (it reports what it saw there).
bool ends_scalar(char c) {
  return whitespace(c) || c == ',' || c == ']' || c == '}' || c == '[' || c == '{' || c == '"' ||
         c == ':' || c == '\0';
}

// Cannot start a value: RapidJSON reports "Invalid value." at it (its number parser sees it).
bool not_a_value(char c) { return c == ',' || c == ']' || c == '}' || c == ':' || c == '\0'; }

}  // namespace

struct JsonListDecoder::Parser : detail::JsonArena {};

JsonListDecoder::JsonListDecoder(ResourceType type) : JsonListDecoder(std::move(type), Options{}) {}

JsonListDecoder::JsonListDecoder(ResourceType type, Options options)
    : type_(std::move(type)),
      gvr_(type_.gvr.to_string()),
      options_(options),
      parser_(std::make_unique<Parser>()) {}

JsonListDecoder::~JsonListDecoder() = default;

Status JsonListDecoder::fail(Error e) {
  failed_ = std::move(e);
  release_buffer();
  return *failed_;
}

Error JsonListDecoder::syntax_error(const std::string& reason, std::uint64_t at) const {
  return detail::decode_error(gvr_ + ": list response is not valid JSON: " + reason + " at byte " +
                              std::to_string(at));
}

Error JsonListDecoder::syntax_error(int rapidjson_code, std::uint64_t at) const {
  return syntax_error(
      rapidjson::GetParseError_En(static_cast<rapidjson::ParseErrorCode>(rapidjson_code)), at);
}

void JsonListDecoder::release_buffer() {
  // One large item would otherwise leave the decoder holding its capacity until the list ends;
  // below the bound it is kept for the next values.
  if (buf_.capacity() > kKeptBufferBytes) {
    std::string().swap(buf_);
  } else {
    buf_.clear();
  }
}

Status JsonListDecoder::append(const char* data, std::size_t n) {
  if (n == 0) return Ok{};
  if (buf_.size() + n > options_.max_item_bytes) {
    std::string what = purpose_ == Purpose::item ? "list item " + std::to_string(list_.items.size())
                                                 : std::string("a list response value");
    return fail(
        Error::make(Errc::too_large, gvr_ + " " + what + " at byte " +
                                         std::to_string(capture_start_) + " exceeds the limit of " +
                                         std::to_string(options_.max_item_bytes) + " bytes"));
  }
  buf_.append(data, n);
  return Ok{};
}

void JsonListDecoder::start_capture(Capture kind, Purpose purpose, std::uint64_t at) {
  capture_ = kind;
  purpose_ = purpose;
  capture_start_ = at;
  buf_.clear();
  stack_.clear();
  in_string_ = false;
  escape_ = false;
  base_depth_ = purpose == Purpose::item ? 2 : 1;  // inside the list object (and items array)
}

Status JsonListDecoder::complete_capture() {
  capture_ = Capture::none;
  parser_->pool.Clear();
  rapidjson::Document doc(&parser_->pool, 1024, &parser_->stack);
  if (auto e = detail::parse_insitu(doc, buf_.data(), buf_.size(), &parser_->stack)) {
    return fail(syntax_error(e->reason, capture_start_ + e->offset));
  }
  switch (purpose_) {
    case Purpose::key: {
      const std::string_view name = detail::view(doc);
      // The first of repeated keys counts, as detail::member() (FindMember) finds it.
      key_ = Key::other;
      if (name == "items" && !seen_items_) {
        key_ = Key::items;
        seen_items_ = true;
      } else if (name == "metadata" && !seen_metadata_) {
        key_ = Key::metadata;
        seen_metadata_ = true;
      }
      state_ = State::colon;
      break;
    }
    case Purpose::member:
      if (key_ == Key::metadata) {
        list_.resource_version = detail::get_string(doc, "resourceVersion");
        list_.continue_token = detail::get_string(doc, "continue");
      } else if (key_ == Key::items && !doc.IsNull()) {
        return fail(detail::decode_error(gvr_ + ": list items is not an array"));
      }
      state_ = State::after_member;
      break;
    case Purpose::item: {
      auto obj = type_.codec->decode(doc);
      if (!obj) {
        Error e = std::move(obj).error();
        e.message = gvr_ + " list item " + std::to_string(list_.items.size()) + ": " + e.message;
        return fail(std::move(e));
      }
      list_.items.push_back(std::move(obj).value());
      state_ = State::after_item;
      break;
    }
  }
  release_buffer();
  return Ok{};
}

Status JsonListDecoder::feed(std::string_view bytes) {
  if (failed_) return *failed_;
  const char* p = bytes.data();
  const char* const end = p + bytes.size();
  if (state_ == State::not_object) {
    if (auto s = append(p, bytes.size()); !s) {
      return fail(detail::decode_error(gvr_ + ": list response is not a JSON object"));
    }
    offset_ += bytes.size();
    return Ok{};
  }
  while (p < end) {
    if (capture_ != Capture::none) {
      // The captured value's bytes, up to its end or the end of this piece.
      const char* const seg = p;
      bool complete = false;
      bool too_deep = false;
      if (capture_ == Capture::scalar) {
        while (p < end && !ends_scalar(*p)) ++p;
        complete = p < end;  // the byte that ends it belongs to what follows
      } else {
        for (; p < end; ++p) {
          const char c = *p;
          if (in_string_) {
            if (escape_) {
              escape_ = false;
            } else if (c == '\\') {
              escape_ = true;
            } else if (c == '"') {
              in_string_ = false;
              if (capture_ == Capture::string) {
                ++p;
                complete = true;
                break;
              }
            }
            continue;
          }
          if (c == '"') {
            in_string_ = true;
          } else if (c == '{' || c == '[') {
            stack_.push_back(c);
            if (base_depth_ + stack_.size() > static_cast<std::size_t>(kMaxJsonDepth)) {
              ++p;
              too_deep = true;
              break;
            }
          } else if (c == '}' || c == ']') {
            const char open = stack_.back();
            stack_.pop_back();
            // A mismatched bracket ends the capture too: RapidJSON reports it there.
            if (stack_.empty() || (open == '{') != (c == '}')) {
              ++p;
              complete = true;
              break;
            }
          }
        }
      }
      const auto n = static_cast<std::size_t>(p - seg);
      if (auto s = append(seg, n); !s) return s;
      offset_ += n;
      if (too_deep) {
        // As RapidJSON (behind detail::parse_insitu) reports it: after the bracket, unless
        // the value is malformed before that.
        const std::uint64_t at = offset_;
        capture_ = Capture::none;
        parser_->pool.Clear();
        rapidjson::Document doc(&parser_->pool, 1024, &parser_->stack);
        auto e = detail::parse_insitu(doc, buf_.data(), buf_.size(), &parser_->stack);
        if (e && capture_start_ + e->offset < at - 1) {
          return fail(syntax_error(e->reason, capture_start_ + e->offset));
        }
        return fail(syntax_error(
            "JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels", at));
      }
      if (complete) {
        if (auto s = complete_capture(); !s) return s;
      }
      continue;
    }
    const char c = *p;
    const std::uint64_t at = offset_;
    if (whitespace(c)) {
      ++p;
      ++offset_;
      continue;
    }
    // A value starts at p: captured from its first byte.
    auto start_value = [&](Purpose purpose) -> Status {
      if (not_a_value(c)) return fail(syntax_error(rapidjson::kParseErrorValueInvalid, at));
      if (c == '{' || c == '[') {
        start_capture(Capture::container, purpose, at);
        stack_.push_back(c);
        buf_.push_back(c);
        ++p;
        ++offset_;
      } else if (c == '"') {
        start_capture(Capture::string, purpose, at);
        in_string_ = true;
        buf_.push_back(c);
        ++p;
        ++offset_;
      } else {
        start_capture(Capture::scalar, purpose, at);
      }
      return Ok{};
    };
    Status s = Ok{};
    switch (state_) {
      case State::start:
        if (c != '{') {
          // Not a list object. Buffered (bounded) so that the error is RapidJSON's, as before.
          state_ = State::not_object;
          offset_ += static_cast<std::size_t>(end - p);
          buf_.clear();
          if (auto a = append(p, static_cast<std::size_t>(end - p)); !a) {
            return fail(detail::decode_error(gvr_ + ": list response is not a JSON object"));
          }
          capture_start_ = at;
          return Ok{};
        }
        state_ = State::key_or_end;
        ++p;
        ++offset_;
        break;
      case State::key_or_end:
      case State::key:
        if (c == '}' && state_ == State::key_or_end) {
          state_ = State::done;
          ++p;
          ++offset_;
        } else if (c == '"') {
          s = start_value(Purpose::key);
        } else {
          return fail(syntax_error(rapidjson::kParseErrorObjectMissName, at));
        }
        break;
      case State::colon:
        if (c != ':') return fail(syntax_error(rapidjson::kParseErrorObjectMissColon, at));
        state_ = State::value;
        ++p;
        ++offset_;
        break;
      case State::value:
        if (key_ == Key::items && c == '[') {
          state_ = State::items_first;
          ++p;
          ++offset_;
        } else {
          s = start_value(Purpose::member);
        }
        break;
      case State::after_member:
        if (c == ',') {
          state_ = State::key;
        } else if (c == '}') {
          state_ = State::done;
        } else {
          return fail(syntax_error(rapidjson::kParseErrorObjectMissCommaOrCurlyBracket, at));
        }
        ++p;
        ++offset_;
        break;
      case State::items_first:
      case State::item:
        if (c == ']' && state_ == State::items_first) {
          state_ = State::after_member;
          ++p;
          ++offset_;
        } else {
          s = start_value(Purpose::item);
        }
        break;
      case State::after_item:
        if (c == ',') {
          state_ = State::item;
        } else if (c == ']') {
          state_ = State::after_member;
        } else {
          return fail(syntax_error(rapidjson::kParseErrorArrayMissCommaOrSquareBracket, at));
        }
        ++p;
        ++offset_;
        break;
      case State::done:
        return fail(syntax_error("unexpected bytes after the JSON value", at));
      case State::not_object:
        break;  // handled above
    }
    if (!s) return s;
  }
  return Ok{};
}

Status JsonListDecoder::truncated_error() {
  if (capture_ == Capture::scalar) {
    // A number or literal can end with the body; what follows it is then missing.
    if (auto s = complete_capture(); !s) return s;
  } else if (capture_ != Capture::none) {
    capture_ = Capture::none;
    parser_->pool.Clear();
    rapidjson::Document doc(&parser_->pool, 1024, &parser_->stack);
    if (auto e = detail::parse_insitu(doc, buf_.data(), buf_.size(), &parser_->stack)) {
      return fail(syntax_error(e->reason, capture_start_ + e->offset));
    }
    return fail(syntax_error("the body ended inside a value", offset_));  // not reached
  }
  switch (state_) {
    case State::start:
      return fail(syntax_error(rapidjson::kParseErrorDocumentEmpty, offset_));
    case State::not_object: {
      rapidjson::Document doc;
      if (auto e = detail::parse_insitu(doc, buf_.data(), buf_.size())) {
        return fail(syntax_error(e->reason, capture_start_ + e->offset));
      }
      return fail(detail::decode_error(gvr_ + ": list response is not a JSON object"));
    }
    case State::key_or_end:
    case State::key:
      return fail(syntax_error(rapidjson::kParseErrorObjectMissName, offset_));
    case State::colon:
      return fail(syntax_error(rapidjson::kParseErrorObjectMissColon, offset_));
    case State::value:
    case State::items_first:
    case State::item:
      return fail(syntax_error(rapidjson::kParseErrorValueInvalid, offset_));
    case State::after_member:
      return fail(syntax_error(rapidjson::kParseErrorObjectMissCommaOrCurlyBracket, offset_));
    case State::after_item:
      return fail(syntax_error(rapidjson::kParseErrorArrayMissCommaOrSquareBracket, offset_));
    case State::done:
      break;
  }
  return Ok{};
}

Result<ObjectList> JsonListDecoder::finish() {
  if (failed_) return *failed_;
  if (finished_) return Error::make(Errc::decode, gvr_ + ": list decoder finished twice");
  finished_ = true;
  if (auto s = truncated_error(); !s) return std::move(s).error();
  release_buffer();
  return std::move(list_);
}

}  // namespace kinformer::client
