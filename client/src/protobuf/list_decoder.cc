#include "kinformer/client/protobuf_list_decoder.h"

#include "protobuf/decoders.h"
#include "protobuf/wire.h"

namespace kinformer::client {
namespace {

// The longest varint (10 bytes: 64 bits, 7 per byte).
constexpr int kMaxVarintBytes = 10;

const char* wire_type_name(int wire_type) {
  switch (wire_type) {
    case 0:
      return "wire type varint";
    case 1:
      return "wire type fixed64";
    case 2:
      return "wire type length-delimited";
    case 5:
      return "wire type fixed32";
    default:
      return "an unknown wire type";
  }
}

}  // namespace

ProtobufListDecoder::ProtobufListDecoder(ProtobufCodecPtr codec)
    : ProtobufListDecoder(std::move(codec), Options{}) {}

ProtobufListDecoder::ProtobufListDecoder(ProtobufCodecPtr codec, Options options)
    : codec_(std::move(codec)),
      options_(options),
      resource_(codec_->gvr().to_string()),
      what_(resource_ + " list response"),
      list_kind_(codec_->gvr().kind + "List") {}

Status ProtobufListDecoder::fail(Error e) {
  failed_ = std::move(e);
  release_buffer();
  return *failed_;
}

void ProtobufListDecoder::release_buffer() {
  if (buf_.capacity() > kKeptBufferBytes) {
    std::string().swap(buf_);
  } else {
    buf_.clear();
  }
}

// The messages are decode_protobuf_list()'s: detail::pb::Decoder's "<Kind>: <field>: <what>"
// ("object" for the message itself), after "<resource> list response: ".
Status ProtobufListDecoder::envelope_error(const char* field, const std::string& what) {
  return fail(Error::make(
      Errc::decode, what_ + ": runtime.Unknown: " + (field ? field : "object") + ": " + what));
}

Status ProtobufListDecoder::list_error(const char* field, const std::string& what) {
  return fail(Error::make(
      Errc::decode, what_ + ": " + list_kind_ + ": " + (field ? field : "object") + ": " + what));
}

Status ProtobufListDecoder::malformed(const char* field, const char* exception) {
  const std::string what = std::string("malformed protobuf (") + exception + ")";
  return in_raw() ? list_error(field, what) : envelope_error(field, what);
}

namespace {

// The field's name as the whole-body decoder's errors give it (nullptr: "object").
const char* name_of(int field) {
  switch (field) {
    case 1:
      return "typeMeta";
    case 2:
      return "raw";
    case 3:
      return "contentEncoding";
    case 4:
      return "contentType";
    case 5:
      return "metadata";
    case 6:
      return "items";
    default:
      return nullptr;
  }
}

}  // namespace

Status ProtobufListDecoder::on_tag(std::uint64_t key) {
  // As protozero reads it: a 32-bit varint (higher bits dropped), tag and wire type.
  const auto value = static_cast<std::uint32_t>(key);
  tag_ = value >> 3U;
  wire_type_ = static_cast<int>(value & 7U);
  if (tag_ == 0 || (tag_ >= 19000 && tag_ <= 19999)) {
    return malformed(nullptr, "invalid tag exception");
  }
  if (wire_type_ != 0 && wire_type_ != 1 && wire_type_ != 2 && wire_type_ != 5) {
    return malformed(nullptr, "unknown pbf field type exception");
  }
  const char* expected = "a message";
  if (in_raw()) {
    field_ = tag_ == 1 ? Field::list_meta : tag_ == 2 ? Field::item : Field::other;
  } else {
    switch (tag_) {
      case 1:
        field_ = Field::type_meta;
        break;
      case 2:
        field_ = Field::raw;
        expected = "bytes";
        break;
      case 3:
        field_ = Field::content_encoding;
        expected = "a string";
        break;
      case 4:
        field_ = Field::content_type;
        expected = "a string";
        break;
      default:
        field_ = Field::other;
    }
  }
  if (field_ == Field::other) {
    switch (wire_type_) {
      case 0:
        phase_ = Phase::skip_varint;
        break;
      case 1:
        phase_ = Phase::skip_bytes;
        left_ = 8;
        break;
      case 5:
        phase_ = Phase::skip_bytes;
        left_ = 4;
        break;
      default:
        phase_ = Phase::length;
    }
    return Ok{};
  }
  if (wire_type_ != 2) {
    const int id = static_cast<int>(field_);  // Field's order is name_of()'s
    std::string what = std::string("expected ") + expected + " (length-delimited), got " +
                       wire_type_name(wire_type_);
    return in_raw() ? list_error(name_of(id), what) : envelope_error(name_of(id), what);
  }
  phase_ = Phase::length;
  return Ok{};
}

Status ProtobufListDecoder::on_length(std::uint64_t length) {
  const std::uint64_t n = static_cast<std::uint32_t>(length);  // protozero's length type
  if (field_ == Field::raw) {
    if (seen_raw_) return envelope_error("raw", "more than one raw field");
    seen_raw_ = true;
    if (auto s = check_kind(); !s) return s;
    raw_left_ = n;
    phase_ = Phase::tag;
    field_ = Field::none;
    return Ok{};
  }
  if (field_ == Field::other) {
    phase_ = n == 0 ? Phase::tag : Phase::skip_bytes;
    left_ = n;
    return Ok{};
  }
  if (n > options_.max_item_bytes) {
    std::string what = field_ == Field::item
                           ? resource_ + " list item " + std::to_string(list_.items.size())
                           : what_ + " field " + name_of(static_cast<int>(field_));
    return fail(Error::make(Errc::too_large,
                            what + " (" + std::to_string(n) + " bytes) exceeds the limit of " +
                                std::to_string(options_.max_item_bytes) + " bytes"));
  }
  buf_.clear();
  left_ = n;
  phase_ = Phase::value;
  if (n == 0) return on_value({});
  return Ok{};
}

Status ProtobufListDecoder::check_kind() {
  detail::pb::Envelope env;
  env.kind = kind_;
  if (auto s = detail::pb::expect_kind(env, list_kind_, what_); !s) {
    return fail(std::move(s).error());
  }
  return Ok{};
}

Status ProtobufListDecoder::on_value(std::string_view bytes) {
  using detail::FieldPath;
  using detail::pb::Decoder;
  using detail::pb::Message;
  const Field field = field_;
  phase_ = Phase::tag;
  field_ = Field::none;
  switch (field) {
    case Field::type_meta: {
      // As detail::pb::parse_envelope reads it.
      Decoder d("runtime.Unknown", nullptr);
      const FieldPath root;
      const FieldPath type_at = root.child("typeMeta");
      Message t(d, bytes, type_at);
      std::string_view api_version;
      std::string_view kind;
      while (t.next()) {
        switch (t.tag()) {
          case 1:
            t.bytes("apiVersion", api_version, "a string");
            break;
          case 2:
            t.bytes("kind", kind, "a string");
            break;
          default:
            t.skip();
        }
      }
      if (auto s = std::move(d).status(); !s) {
        return fail(Error::make(Errc::decode, what_ + ": " + s.error().message));
      }
      kind_.assign(kind);
      break;
    }
    case Field::content_encoding:
      content_encoding_.assign(bytes.substr(0, 32));
      break;
    case Field::list_meta: {
      Decoder d(list_kind_, nullptr);
      const FieldPath root;
      const FieldPath at = root.child("metadata");
      Message md(d, bytes, at);
      detail::pb::decode_list_meta(md, list_.resource_version, list_.continue_token);
      if (auto s = std::move(d).status(); !s) {
        return fail(Error::make(Errc::decode, what_ + ": " + s.error().message));
      }
      break;
    }
    case Field::item: {
      auto object = codec_->decode(bytes);
      if (!object) {
        Error e = std::move(object).error();
        e.message =
            resource_ + " list item " + std::to_string(list_.items.size()) + ": " + e.message;
        return fail(std::move(e));
      }
      list_.items.push_back(std::move(object).value());
      break;
    }
    default:
      break;  // contentType: not needed
  }
  release_buffer();
  return Ok{};
}

Status ProtobufListDecoder::feed(std::string_view bytes) {
  if (failed_) return *failed_;
  for (;;) {
    if (raw_left_ && *raw_left_ == 0) {
      // raw (the list) ends here, which must be between two of its fields.
      const bool between = phase_ == Phase::tag && varint_bytes_ == 0;
      if (!between) {
        const char* name = phase_ == Phase::length || phase_ == Phase::value
                               ? name_of(static_cast<int>(field_))
                               : nullptr;
        return malformed(name, "end of buffer exception");
      }
      raw_left_.reset();
    }
    if (bytes.empty()) break;
    const bool inside = in_raw();
    std::string_view avail = inside ? bytes.substr(0, *raw_left_) : bytes;
    std::size_t used = 0;
    switch (phase_) {
      case Phase::magic:
        while (used < avail.size() && offset_ + used < kProtobufMagic.size()) {
          if (avail[used] != kProtobufMagic[offset_ + used]) {
            return fail(Error::make(
                Errc::decode, what_ + ": not a Kubernetes protobuf message (no k8s\\0 prefix)"));
          }
          ++used;
        }
        if (offset_ + used == kProtobufMagic.size()) phase_ = Phase::tag;
        break;
      case Phase::tag:
      case Phase::length:
      case Phase::skip_varint: {
        // One varint, possibly split across pieces.
        bool done = false;
        while (used < avail.size() && !done) {
          const auto b = static_cast<unsigned char>(avail[used++]);
          if (varint_bytes_ == kMaxVarintBytes) {
            const char* name =
                phase_ == Phase::length ? name_of(static_cast<int>(field_)) : nullptr;
            return malformed(name, "varint too long exception");
          }
          const int shift = 7 * varint_bytes_++;
          varint_ |= static_cast<std::uint64_t>(b & 0x7FU) << shift;
          done = (b & 0x80U) == 0;
        }
        if (!done) break;
        const std::uint64_t v = varint_;
        varint_ = 0;
        varint_bytes_ = 0;
        Status s = Ok{};
        if (phase_ == Phase::tag) {
          s = on_tag(v);
        } else if (phase_ == Phase::length) {
          s = on_length(v);
        } else {
          phase_ = Phase::tag;
        }
        if (!s) return s;
        break;
      }
      case Phase::value: {
        const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(avail.size(), left_));
        used = n;
        left_ -= n;
        if (left_ == 0 && buf_.empty()) {
          // Arrived whole in this piece: decoded in place.
          if (auto s = on_value(avail.substr(0, n)); !s) return s;
        } else {
          buf_.append(avail.data(), n);
          if (left_ == 0) {
            if (auto s = on_value(buf_); !s) return s;
          }
        }
        break;
      }
      case Phase::skip_bytes: {
        const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(avail.size(), left_));
        used = n;
        left_ -= n;
        if (left_ == 0) phase_ = Phase::tag;
        break;
      }
    }
    bytes.remove_prefix(used);
    offset_ += used;
    if (inside && raw_left_) *raw_left_ -= used;
  }
  return Ok{};
}

Result<ObjectList> ProtobufListDecoder::finish() {
  if (failed_) return *failed_;
  if (finished_) return Error::make(Errc::decode, what_ + ": list decoder finished twice");
  finished_ = true;
  auto envelope = [&](const std::string& why) -> Result<ObjectList> {
    return fail(Error::make(Errc::decode, what_ + ": " + why)).error();
  };
  if (phase_ == Phase::magic) {
    if (offset_ == 0) return envelope("empty protobuf body");
    if (offset_ < kProtobufMagic.size()) {
      return envelope("not a Kubernetes protobuf message (no k8s\\0 prefix)");
    }
  }
  if (offset_ == kProtobufMagic.size()) {
    return envelope("empty protobuf message after the k8s\\0 prefix");
  }
  if (in_raw()) {
    return envelope_error("raw", "malformed protobuf (end of buffer exception)").error();
  }
  if (phase_ != Phase::tag || varint_bytes_ != 0) {
    const char* name = phase_ == Phase::length || phase_ == Phase::value
                           ? name_of(static_cast<int>(field_))
                           : nullptr;
    return envelope_error(name, "malformed protobuf (end of buffer exception)").error();
  }
  if (!content_encoding_.empty()) {
    return envelope("unsupported contentEncoding \"" + content_encoding_ + "\"");
  }
  if (auto s = check_kind(); !s) return std::move(s).error();
  if (!seen_raw_) return envelope("no raw field (the list) in the runtime.Unknown");
  release_buffer();
  return std::move(list_);
}

}  // namespace kinformer::client
