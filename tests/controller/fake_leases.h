#pragma once
// FakeLeases: coordination.k8s.io/v1 Leases served by the scripted FakeApiServer, with the API
// server's optimistic concurrency: GET (404 when absent), POST (409 AlreadyExists), PUT (409
// Conflict unless the body's resourceVersion is the stored one). Faults are injected per request.

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fake_apiserver.h"
#include "kinformer/controller/lease_lock.h"

namespace kinformer::testing {

class FakeLeases {
 public:
  static constexpr const char* kPrefix = "/apis/coordination.k8s.io/v1/namespaces/";
  /// Called before a request is served, outside the fake's lock; a Reply answers it instead.
  using Fault = std::function<std::optional<Reply>(const Request&)>;

  explicit FakeLeases(FakeApiServer& server) {
    const std::string any = std::string(kPrefix) + "*";
    server.on("GET", any, [this](const Request& r) { return serve(r); });
    server.on("POST", any, [this](const Request& r) { return serve(r); });
    server.on("PUT", any, [this](const Request& r) { return serve(r); });
  }

  void set_fault(Fault fault) {
    std::lock_guard lock(mu_);
    fault_ = std::move(fault);
  }

  /// Writes a Lease as another holder would (a new resourceVersion); `spec` is its JSON.
  void put(const std::string& ns, const std::string& name, const std::string& spec_json) {
    std::lock_guard lock(mu_);
    const std::string json = R"({"apiVersion":"coordination.k8s.io/v1","kind":"Lease",)"
                             R"("metadata":{"name":")" +
                             name + R"(","namespace":")" + ns + R"("},"spec":)" + spec_json + "}";
    store(ns + "/" + name, json);
  }

  /// Deletes a Lease as another client would.
  void remove(const std::string& ns, const std::string& name) {
    std::lock_guard lock(mu_);
    leases_.erase(ns + "/" + name);
  }

  /// The stored Lease's JSON, or nullopt.
  std::optional<std::string> json(const std::string& ns, const std::string& name) const {
    std::lock_guard lock(mu_);
    auto it = leases_.find(ns + "/" + name);
    if (it == leases_.end()) return std::nullopt;
    return it->second;
  }
  /// The stored Lease's record, or nullopt.
  std::optional<controller::LeaderElectionRecord> record(const std::string& ns,
                                                         const std::string& name) const {
    auto j = json(ns, name);
    if (!j) return std::nullopt;
    auto r = controller::lease_record_from_json(*j);
    if (!r) return std::nullopt;
    return *r;
  }
  /// The holder of every successful write, in order ("" for a release).
  std::vector<std::string> writers() const {
    std::lock_guard lock(mu_);
    return writers_;
  }

 private:
  static std::string write(const rapidjson::Value& v) {
    rapidjson::StringBuffer buf;
    rapidjson::Writer<rapidjson::StringBuffer> w(buf);
    v.Accept(w);
    return {buf.GetString(), buf.GetSize()};
  }

  // Stores `json` under `key` with the next resourceVersion. mu_ held.
  void store(const std::string& key, const std::string& json) {
    rapidjson::Document doc;
    doc.Parse(json.c_str());
    auto& alloc = doc.GetAllocator();
    const std::string rv = std::to_string(++rv_);
    auto& meta = doc["metadata"];
    meta.RemoveMember("resourceVersion");
    meta.AddMember("resourceVersion", rapidjson::Value(rv.c_str(), alloc), alloc);
    leases_[key] = write(doc);
    auto r = controller::lease_record_from_json(leases_[key]);
    writers_.push_back(r ? r->holder_identity : "<undecodable>");
  }

  Reply serve(const Request& r) {
    Fault fault;
    {
      std::lock_guard lock(mu_);
      fault = fault_;
    }
    if (fault) {
      if (auto reply = fault(r)) return *reply;
    }
    std::lock_guard lock(mu_);
    // kPrefix NS/leases[/NAME]
    const std::string rest = r.path.substr(std::string(kPrefix).size());
    const auto slash = rest.find('/');
    const std::string ns = rest.substr(0, slash);
    const std::string tail = slash == std::string::npos ? "" : rest.substr(slash + 1);
    if (tail.rfind("leases", 0) != 0) return Reply::api_status(404, "NotFound", "no such path");
    const std::string name = tail.size() > 7 ? tail.substr(7) : "";
    if (r.method == "GET") {
      auto it = leases_.find(ns + "/" + name);
      if (it == leases_.end()) {
        return Reply::api_status(404, "NotFound",
                                 "leases.coordination.k8s.io \"" + name + "\" not found");
      }
      return Reply::json(it->second);
    }
    rapidjson::Document body;
    body.Parse(r.body.c_str());
    if (body.HasParseError() || !body.IsObject() || !body.HasMember("metadata")) {
      return Reply::api_status(400, "BadRequest", "not a Lease");
    }
    const std::string body_name = body["metadata"]["name"].GetString();
    const std::string key = ns + "/" + body_name;
    if (r.method == "POST") {
      if (leases_.count(key)) {
        return Reply::api_status(409, "AlreadyExists",
                                 "leases.coordination.k8s.io \"" + body_name + "\" already exists");
      }
      store(key, r.body);
      return Reply::json(leases_[key], 201);
    }
    // PUT
    auto it = leases_.find(key);
    if (it == leases_.end()) return Reply::api_status(404, "NotFound", "not found");
    rapidjson::Document stored;
    stored.Parse(it->second.c_str());
    const auto& meta = body["metadata"];
    const std::string sent_rv =
        meta.HasMember("resourceVersion") ? meta["resourceVersion"].GetString() : "";
    if (sent_rv != stored["metadata"]["resourceVersion"].GetString()) {
      return Reply::api_status(409, "Conflict",
                               "Operation cannot be fulfilled on leases.coordination.k8s.io \"" +
                                   body_name + "\": the object has been modified");
    }
    store(key, r.body);
    return Reply::json(leases_[key]);
  }

  mutable std::mutex mu_;
  Fault fault_;                                // guarded by mu_
  std::map<std::string, std::string> leases_;  // guarded by mu_
  std::vector<std::string> writers_;           // guarded by mu_
  long rv_ = 100;                              // guarded by mu_
};

}  // namespace kinformer::testing
