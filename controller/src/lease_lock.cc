#include "kinformer/controller/lease_lock.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cctype>
#include <limits>
#include <utility>

#include "kinformer/client/error.h"
#include "kinformer/client/timestamp.h"
#include "lease_watch.h"

namespace kinformer::controller {
namespace {

using client::Errc;
using client::Error;

Error decode_error(std::string message) { return Error::make(Errc::decode, std::move(message)); }

const rapidjson::Value* member(const rapidjson::Value& v, const char* name) {
  if (!v.IsObject() || !v.HasMember(name)) return nullptr;
  const rapidjson::Value& m = v[name];
  return m.IsNull() ? nullptr : &m;
}

client::Status read_int(const rapidjson::Value& spec, const char* name, int& out) {
  const auto* v = member(spec, name);
  if (!v) return client::Ok{};
  if (!v->IsInt()) return decode_error(std::string("Lease spec.") + name + ": not an integer");
  out = v->GetInt();
  return client::Ok{};
}

client::Status read_time(const rapidjson::Value& spec, const char* name,
                         std::optional<MicroTime>& out) {
  const auto* v = member(spec, name);
  if (!v) return client::Ok{};
  if (!v->IsString()) return decode_error(std::string("Lease spec.") + name + ": not a string");
  auto t = parse_micro_time(std::string_view(v->GetString(), v->GetStringLength()));
  if (!t) return decode_error(std::string("Lease spec.") + name + ": not an RFC 3339 time");
  out = *t;
  return client::Ok{};
}

void set(rapidjson::Value& object, const char* name, rapidjson::Value value,
         rapidjson::Document::AllocatorType& alloc) {
  object.RemoveMember(name);
  object.AddMember(rapidjson::Value(name, alloc), std::move(value), alloc);
}

void set_time(rapidjson::Value& spec, const char* name, const std::optional<MicroTime>& time,
              rapidjson::Document::AllocatorType& alloc) {
  if (!time) {
    spec.RemoveMember(name);
    return;
  }
  const std::string text = format_micro_time(*time);
  set(spec, name,
      rapidjson::Value(text.c_str(), static_cast<rapidjson::SizeType>(text.size()), alloc), alloc);
}

std::string write(const rapidjson::Value& v) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  v.Accept(w);
  return {buf.GetString(), buf.GetSize()};
}

}  // namespace

const client::ResourceType& lease_resource() {
  static const auto type =
      client::dynamic_resource({"coordination.k8s.io", "v1", "leases", "Lease", true});
  return type;
}

std::string format_micro_time(MicroTime time) {
  using std::chrono::floor;
  using std::chrono::microseconds;
  using std::chrono::seconds;
  const auto whole = floor<seconds>(time);
  const auto micros = (time - whole).count();  // 0..999999
  auto ts = client::Timestamp::from_unix_seconds(whole.time_since_epoch().count());
  if (!ts) ts = client::Timestamp::from_unix_seconds(0);
  std::string text = ts->to_string();  // "2024-05-01T10:00:00Z"
  std::string fraction = std::to_string(micros);
  fraction.insert(0, 6 - fraction.size(), '0');
  text.insert(text.size() - 1, "." + fraction);
  return text;
}

std::optional<MicroTime> parse_micro_time(std::string_view text) {
  auto ts = client::Timestamp::parse(text);
  if (!ts) return std::nullopt;
  // Timestamp drops the fraction; read it here ("YYYY-MM-DDTHH:MM:SS.ffffff...").
  long micros = 0;
  constexpr std::size_t kFractionAt = 19;
  if (text.size() > kFractionAt && text[kFractionAt] == '.') {
    int digits = 0;
    for (std::size_t i = kFractionAt + 1;
         i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
      if (digits < 6) {
        micros = micros * 10 + (text[i] - '0');
        ++digits;
      }
    }
    for (; digits < 6; ++digits) micros *= 10;
  }
  return MicroTime(std::chrono::seconds(ts->unix_seconds())) + std::chrono::microseconds(micros);
}

client::Result<LeaderElectionRecord> lease_record_from_json(std::string_view lease_json) {
  rapidjson::Document doc;
  doc.Parse(lease_json.data(), lease_json.size());
  if (doc.HasParseError() || !doc.IsObject()) return decode_error("Lease: not a JSON object");
  LeaderElectionRecord record;
  const auto* spec = member(doc, "spec");
  if (!spec) return record;
  if (!spec->IsObject()) return decode_error("Lease spec: not an object");
  if (const auto* holder = member(*spec, "holderIdentity")) {
    if (!holder->IsString()) return decode_error("Lease spec.holderIdentity: not a string");
    record.holder_identity.assign(holder->GetString(), holder->GetStringLength());
  }
  if (auto s = read_int(*spec, "leaseDurationSeconds", record.lease_duration_seconds); !s) {
    return std::move(s).error();
  }
  if (auto s = read_int(*spec, "leaseTransitions", record.leader_transitions); !s) {
    return std::move(s).error();
  }
  if (auto s = read_time(*spec, "acquireTime", record.acquire_time); !s) {
    return std::move(s).error();
  }
  if (auto s = read_time(*spec, "renewTime", record.renew_time); !s) return std::move(s).error();
  return record;
}

client::Result<std::string> lease_json_with_record(std::string_view lease_json,
                                                   const LeaderElectionRecord& record) {
  rapidjson::Document doc;
  doc.Parse(lease_json.data(), lease_json.size());
  if (doc.HasParseError() || !doc.IsObject()) return decode_error("Lease: not a JSON object");
  auto& alloc = doc.GetAllocator();
  if (!doc.HasMember("spec") || !doc["spec"].IsObject()) {
    set(doc, "spec", rapidjson::Value(rapidjson::kObjectType), alloc);
  }
  auto& spec = doc["spec"];
  // client-go writes holderIdentity even when empty (a release).
  set(spec, "holderIdentity",
      rapidjson::Value(record.holder_identity.c_str(),
                       static_cast<rapidjson::SizeType>(record.holder_identity.size()), alloc),
      alloc);
  set(spec, "leaseDurationSeconds", rapidjson::Value(record.lease_duration_seconds), alloc);
  set(spec, "leaseTransitions", rapidjson::Value(record.leader_transitions), alloc);
  set_time(spec, "acquireTime", record.acquire_time, alloc);
  set_time(spec, "renewTime", record.renew_time, alloc);
  return write(doc);
}

LeaseLock::LeaseLock(std::shared_ptr<client::RestClient> client, std::string ns, std::string name,
                     client::LogSink log)
    : client_(std::move(client)),
      namespace_(std::move(ns)),
      name_(std::move(name)),
      log_(std::move(log)) {
  if (!client_) throw client::ConfigError("LeaseLock: client is null");
  if (namespace_.empty()) throw client::ConfigError("LeaseLock: namespace is empty");
  if (name_.empty()) throw client::ConfigError("LeaseLock: name is empty");
}

std::string LeaseLock::describe() const { return namespace_ + "/" + name_; }

RecordWatchPtr LeaseLock::watch(RecordChanged changed) {
  return std::make_unique<detail::LeaseWatch>(*client_, namespace_, name_, log_,
                                              std::move(changed));
}

client::Status LeaseLock::keep(client::Result<client::ObjectPtr> written) {
  if (!written) return std::move(written).error();
  auto lease = std::dynamic_pointer_cast<const client::DynamicObject>(*written);
  if (!lease) return decode_error("Lease " + describe() + ": not decoded as a dynamic object");
  lease_ = std::move(lease);
  return client::Ok{};
}

client::Result<LeaderElectionRecord> LeaseLock::get() {
  if (auto s = keep(client_->get(lease_resource(), namespace_, name_)); !s) {
    return std::move(s).error();
  }
  return lease_record_from_json(lease_->json);
}

client::Status LeaseLock::create(const LeaderElectionRecord& record) {
  rapidjson::Document doc(rapidjson::kObjectType);
  auto& alloc = doc.GetAllocator();
  auto str = [&](const std::string& s) {
    return rapidjson::Value(s.c_str(), static_cast<rapidjson::SizeType>(s.size()), alloc);
  };
  doc.AddMember("apiVersion", "coordination.k8s.io/v1", alloc);
  doc.AddMember("kind", "Lease", alloc);
  rapidjson::Value meta(rapidjson::kObjectType);
  meta.AddMember("name", str(name_), alloc);
  meta.AddMember("namespace", str(namespace_), alloc);
  doc.AddMember("metadata", std::move(meta), alloc);
  auto json = lease_json_with_record(write(doc), record);
  if (!json) return std::move(json).error();
  client::DynamicObject lease;
  lease.metadata.name = name_;
  lease.metadata.namespace_ = namespace_;
  lease.json = std::move(*json);
  return keep(client_->create(lease_resource(), lease));
}

client::Status LeaseLock::update(const LeaderElectionRecord& record) {
  if (!lease_) {
    Error e = Error::make(Errc::api, "Lease " + describe() + " not read yet");
    e.http_status = 404;
    return e;
  }
  auto json = lease_json_with_record(lease_->json, record);
  if (!json) return std::move(json).error();
  client::DynamicObject lease;
  lease.metadata = lease_->metadata;
  lease.json = std::move(*json);
  return keep(client_->update(lease_resource(), lease));
}

}  // namespace kinformer::controller
