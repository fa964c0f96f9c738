// core/v1 Pod model: decode of a full server object, tolerance, wrong shapes, round trip.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "kinformer/client/pod.h"

namespace kinformer::client {
namespace {

Result<std::shared_ptr<Object>> decode_pod(const std::string& json) {
  rapidjson::Document doc;
  doc.Parse(json.c_str());
  EXPECT_FALSE(doc.HasParseError()) << json;
  return ResourceTraits<Pod>::type().codec->decode(doc);
}

// As served by kube-apiserver 1.30 (kind), for a Deployment's Pod with an Istio sidecar;
// abridged only in managedFields' repetition.
constexpr const char* kServerPod = R"({
  "kind": "Pod",
  "apiVersion": "v1",
  "metadata": {
    "name": "reviews-v1-5b5d6494f4-2xk8m",
    "generateName": "reviews-v1-5b5d6494f4-",
    "namespace": "bookinfo",
    "uid": "0c6cfd93-0f3a-4a21-9f6b-3f4b7f0b9d11",
    "resourceVersion": "184392",
    "creationTimestamp": "2024-05-02T09:14:07Z",
    "labels": {
      "app": "reviews",
      "pod-template-hash": "5b5d6494f4",
      "security.istio.io/tlsMode": "istio",
      "service.istio.io/canonical-name": "reviews",
      "version": "v1"
    },
    "annotations": {
      "kubectl.kubernetes.io/default-container": "reviews",
      "prometheus.io/path": "/stats/prometheus",
      "prometheus.io/port": "15020",
      "sidecar.istio.io/status": "{\"initContainers\":[\"istio-init\"],\"containers\":[\"istio-proxy\"]}"
    },
    "ownerReferences": [
      {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "reviews-v1-5b5d6494f4",
        "uid": "8d1f5b0e-2b7c-4b43-a3a4-1f1f7a0f5e21",
        "controller": true,
        "blockOwnerDeletion": true
      }
    ],
    "managedFields": [
      {
        "manager": "kube-controller-manager",
        "operation": "Update",
        "apiVersion": "v1",
        "time": "2024-05-02T09:14:07Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}}},
                     "f:spec": {"f:containers": {"k:{\"name\":\"reviews\"}": {".": {}, "f:image": {}}}}}
      },
      {
        "manager": "kubelet",
        "operation": "Update",
        "apiVersion": "v1",
        "time": "2024-05-02T09:14:19Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:status": {}}}}},
        "subresource": "status"
      }
    ]
  },
  "spec": {
    "volumes": [
      {"name": "kube-api-access-7kq2l", "projected": {"sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}], "defaultMode": 420}}
    ],
    "initContainers": [
      {"name": "istio-init", "image": "docker.io/istio/proxyv2:1.22.0", "args": ["istio-iptables", "-p", "15001"]}
    ],
    "containers": [
      {
        "name": "reviews",
        "image": "docker.io/istio/examples-bookinfo-reviews-v1:1.20.1",
        "ports": [{"containerPort": 9080, "protocol": "TCP"}],
        "env": [{"name": "LOG_DIR", "value": "/tmp/logs"}],
        "resources": {},
        "volumeMounts": [{"name": "kube-api-access-7kq2l", "readOnly": true, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
        "securityContext": {"runAsUser": 1000}
      },
      {
        "name": "istio-proxy",
        "image": "docker.io/istio/proxyv2:1.22.0",
        "args": ["proxy", "sidecar", "--domain", "$(POD_NAMESPACE).svc.cluster.local"],
        "ports": [
          {"name": "http-envoy-prom", "containerPort": 15090, "protocol": "TCP"},
          {"name": "dns-udp", "containerPort": 15053, "protocol": "UDP"}
        ],
        "readinessProbe": {"httpGet": {"path": "/healthz/ready", "port": 15021, "scheme": "HTTP"}, "periodSeconds": 15},
        "resources": {"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "10m", "memory": "40Mi"}}
      }
    ],
    "restartPolicy": "Always",
    "terminationGracePeriodSeconds": 30,
    "dnsPolicy": "ClusterFirst",
    "serviceAccountName": "bookinfo-reviews",
    "serviceAccount": "bookinfo-reviews",
    "nodeName": "kind-worker2",
    "securityContext": {},
    "schedulerName": "default-scheduler",
    "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
    "priority": 0,
    "enableServiceLinks": true,
    "preemptionPolicy": "PreemptLowerPriority"
  },
  "status": {
    "phase": "Running",
    "conditions": [
      {"type": "PodReadyToStartContainers", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2024-05-02T09:14:09Z"},
      {"type": "Initialized", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2024-05-02T09:14:10Z"},
      {"type": "Ready", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2024-05-02T09:14:19Z"},
      {"type": "ContainersReady", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2024-05-02T09:14:19Z"},
      {"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2024-05-02T09:14:07Z"}
    ],
    "hostIP": "172.18.0.3",
    "hostIPs": [{"ip": "172.18.0.3"}],
    "podIP": "10.244.2.17",
    "podIPs": [{"ip": "10.244.2.17"}, {"ip": "fd00:10:244:2::11"}],
    "startTime": "2024-05-02T09:14:07Z",
    "containerStatuses": [
      {"name": "reviews", "state": {"running": {"startedAt": "2024-05-02T09:14:11Z"}}, "ready": true, "restartCount": 0,
       "image": "docker.io/istio/examples-bookinfo-reviews-v1:1.20.1", "imageID": "docker.io/istio/examples-bookinfo-reviews-v1@sha256:5b6f", "containerID": "containerd://a1", "started": true}
    ],
    "qosClass": "Burstable"
  }
})";

TEST(Pod, DecodesFullServerObject) {
  auto r = decode_pod(kServerPod);
  ASSERT_TRUE(r) << r.error().to_string();
  const auto& pod = dynamic_cast<const Pod&>(*r.value());
  EXPECT_EQ(pod.key(), "bookinfo/reviews-v1-5b5d6494f4-2xk8m");
  EXPECT_EQ(pod.metadata.resource_version, "184392");
  EXPECT_EQ(*find_value(pod.metadata.labels, "app"), "reviews");
  ASSERT_EQ(pod.metadata.owner_references.size(), 1u);
  EXPECT_TRUE(pod.metadata.owner_references[0].controller);
  EXPECT_EQ(pod.node_name, "kind-worker2");
  EXPECT_EQ(pod.service_account_name, "bookinfo-reviews");
  EXPECT_FALSE(pod.host_network);
  ASSERT_EQ(pod.containers.size(), 2u);  // initContainers are not kept
  EXPECT_EQ(pod.containers[0].name, "reviews");
  EXPECT_EQ(pod.containers[0].image, "docker.io/istio/examples-bookinfo-reviews-v1:1.20.1");
  ASSERT_EQ(pod.containers[0].ports.size(), 1u);
  EXPECT_EQ(pod.containers[0].ports[0], (ContainerPort{"", 9080, "TCP"}));
  ASSERT_EQ(pod.containers[1].ports.size(), 2u);
  EXPECT_EQ(pod.containers[1].ports[1], (ContainerPort{"dns-udp", 15053, "UDP"}));
  EXPECT_EQ(pod.phase, "Running");
  EXPECT_EQ(pod.pod_ip, "10.244.2.17");
  EXPECT_EQ(pod.pod_ips, (std::vector<std::string>{"10.244.2.17", "fd00:10:244:2::11"}));
  EXPECT_EQ(pod.host_ip, "172.18.0.3");
  ASSERT_EQ(pod.conditions.size(), 5u);
  EXPECT_EQ(pod.conditions[2], (PodCondition{"Ready", "True"}));
  EXPECT_TRUE(pod.ready());
}

TEST(Pod, MissingOptionalFieldsAreDefaults) {
  auto r = decode_pod(R"({"metadata":{"name":"p","namespace":"ns"},
    "spec":{"containers":[{"name":"c","ports":[{"containerPort":80}]}]},"status":{"phase":"Pending"}})");
  ASSERT_TRUE(r) << r.error().to_string();
  const auto& pod = dynamic_cast<const Pod&>(*r.value());
  EXPECT_EQ(pod.node_name, "");
  EXPECT_EQ(pod.containers[0].image, "");
  EXPECT_EQ(pod.containers[0].ports[0].protocol, "TCP");  // the API default
  EXPECT_TRUE(pod.pod_ips.empty());
  EXPECT_FALSE(pod.ready());

  auto bare = decode_pod(R"({"metadata":{"name":"p"},"spec":null})");
  ASSERT_TRUE(bare) << bare.error().to_string();
  EXPECT_TRUE(dynamic_cast<const Pod&>(*bare.value()).containers.empty());
}

TEST(Pod, ReadyNeedsReadyTrue) {
  auto r = decode_pod(R"({"metadata":{"name":"p"},"status":{"conditions":[
    {"type":"ContainersReady","status":"True"},{"type":"Ready","status":"False"}]}})");
  ASSERT_TRUE(r);
  EXPECT_FALSE(dynamic_cast<const Pod&>(*r.value()).ready());
}

struct WrongShape {
  const char* json;
  const char* field;
};

class PodWrongShape : public ::testing::TestWithParam<WrongShape> {};

TEST_P(PodWrongShape, IsDecodeErrorNamingTheField) {
  auto r = decode_pod(GetParam().json);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::decode);
  EXPECT_NE(r.error().message.find(GetParam().field), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("Pod ns/p"), std::string::npos) << r.error().message;
}

INSTANTIATE_TEST_SUITE_P(
    Fields, PodWrongShape,
    ::testing::Values(
        WrongShape{R"({"metadata":{"name":"p","namespace":"ns"},"spec":[]})",
                   "spec: expected an object, got an array"},
        WrongShape{R"({"metadata":{"name":"p","namespace":"ns"},"spec":{"hostNetwork":"yes"}})",
                   "spec.hostNetwork: expected a boolean, got a string"},
        WrongShape{R"({"metadata":{"name":"p","namespace":"ns"},"spec":{"containers":{}}})",
                   "spec.containers:"},
        WrongShape{
            R"({"metadata":{"name":"p","namespace":"ns"},"spec":{"containers":[{"name":"a"},"b"]}})",
            "spec.containers[1]: expected an object, got a string"},
        WrongShape{
            R"({"metadata":{"name":"p","namespace":"ns"},"spec":{"containers":[{"name":"a","ports":[{"containerPort":"80"}]}]}})",
            "spec.containers[0].ports[0].containerPort: expected a 32-bit integer, got a string"},
        WrongShape{
            R"({"metadata":{"name":"p","namespace":"ns"},"spec":{"containers":[{"name":"a","ports":[{"containerPort":8000000000}]}]}})",
            "spec.containers[0].ports[0].containerPort"},
        WrongShape{R"({"metadata":{"name":"p","namespace":"ns"},"status":{"podIP":1}})",
                   "status.podIP: expected a string"},
        WrongShape{R"({"metadata":{"name":"p","namespace":"ns"},"status":{"podIPs":["10.0.0.1"]}})",
                   "status.podIPs[0]"},
        WrongShape{
            R"({"metadata":{"name":"p","namespace":"ns"},"status":{"conditions":[{"type":"Ready","status":true}]}})",
            "status.conditions[0].status: expected a string, got a boolean"}));

TEST(Pod, WrongShapeMessageNeverCarriesTheValue) {
  auto r = decode_pod(
      R"({"metadata":{"name":"p","namespace":"ns"},"spec":{"nodeName":{"secret":"hunter2"}}})");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message.find("hunter2"), std::string::npos);
}

TEST(Pod, EncodeDecodeRoundTrip) {
  auto r = decode_pod(kServerPod);
  ASSERT_TRUE(r);
  const auto& pod = dynamic_cast<const Pod&>(*r.value());
  std::string encoded = ResourceTraits<Pod>::type().codec->encode(pod);
  EXPECT_EQ(encoded.find("managedFields"), std::string::npos);
  EXPECT_NE(encoded.find(R"("apiVersion":"v1","kind":"Pod")"), std::string::npos);
  auto again = decode_pod(encoded);
  ASSERT_TRUE(again) << again.error().to_string();
  const auto& pod2 = dynamic_cast<const Pod&>(*again.value());
  EXPECT_EQ(pod2.metadata, pod.metadata);  // every field, creationTimestamp included
  EXPECT_EQ(pod2.node_name, pod.node_name);
  EXPECT_EQ(pod2.service_account_name, pod.service_account_name);
  EXPECT_EQ(pod2.host_network, pod.host_network);
  EXPECT_EQ(pod2.containers, pod.containers);
  EXPECT_EQ(pod2.phase, pod.phase);
  EXPECT_EQ(pod2.pod_ip, pod.pod_ip);
  EXPECT_EQ(pod2.pod_ips, pod.pod_ips);
  EXPECT_EQ(pod2.host_ip, pod.host_ip);
  EXPECT_EQ(pod2.conditions, pod.conditions);

  Pod host;
  host.metadata.name = "h";
  host.host_network = true;
  auto h = decode_pod(ResourceTraits<Pod>::type().codec->encode(host));
  ASSERT_TRUE(h);
  EXPECT_TRUE(dynamic_cast<const Pod&>(*h.value()).host_network);
}

// Found by model_fuzz: encode() dropped generation, creationTimestamp and deletionTimestamp, so
// an object written back (a dynamic copy, a test server's state) lost them.
TEST(Pod, EncodeKeepsGenerationAndTimestamps) {
  auto r = decode_pod(R"({"metadata":{"name":"p","namespace":"ns","generation":7,
      "creationTimestamp":"2024-05-02T09:14:07Z","deletionTimestamp":"2024-05-03T00:00:00Z"}})");
  ASSERT_TRUE(r);
  auto again = decode_pod(ResourceTraits<Pod>::type().codec->encode(*r.value()));
  ASSERT_TRUE(again) << again.error().to_string();
  const ObjectMeta& meta = again.value()->metadata;
  EXPECT_EQ(meta.generation, 7);
  EXPECT_EQ(meta.creation_timestamp.to_string(), "2024-05-02T09:14:07Z");
  ASSERT_TRUE(meta.deletion_timestamp);
  EXPECT_EQ(meta.deletion_timestamp->to_string(), "2024-05-03T00:00:00Z");
  EXPECT_EQ(meta, r.value()->metadata);
}

}  // namespace
}  // namespace kinformer::client
