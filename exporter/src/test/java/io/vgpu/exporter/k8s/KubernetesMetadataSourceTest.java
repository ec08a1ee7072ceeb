package io.vgpu.exporter.k8s;

import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.Node;
import io.fabric8.kubernetes.api.model.NodeBuilder;
import io.fabric8.kubernetes.api.model.NodeListBuilder;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.fabric8.kubernetes.api.model.PodListBuilder;
import io.fabric8.kubernetes.api.model.StatusBuilder;
import io.fabric8.kubernetes.api.model.WatchEvent;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.server.mock.KubernetesMockServer;
import io.vgpu.exporter.testing.Await;
import io.vgpu.exporter.testing.KubeObjects;
import java.net.InetAddress;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The node-scoped informer against fabric8's mock server in expectations mode (CRUD mode ignores
 * spec.nodeName field selectors). Only the node-scoped paths are expected: a cluster-wide pod list
 * or watch would get 404 and the pods would never appear.
 */
class KubernetesMetadataSourceTest {
  static final String NODE = "node-a";
  static final String POD_LIST =
      "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a&resourceVersion=0";
  static final String NODE_LIST =
      "/api/v1/nodes?fieldSelector=metadata.name%3Dnode-a&resourceVersion=0";

  /** Retries list without resourceVersion=0. */
  static final String POD_LIST_RETRY = "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a";

  static final String NODE_LIST_RETRY = "/api/v1/nodes?fieldSelector=metadata.name%3Dnode-a";
  static final String UID_A = "aaaaaaaa-0000-4000-8000-00000000000a";
  static final String UID_B = "bbbbbbbb-0000-4000-8000-00000000000b";

  private KubernetesMockServer server;
  private KubernetesMetadataSource source;

  @AfterEach
  void tearDown() {
    // Closing open watch sockets against the mock waits for a close frame it never sends; do it
    // off the test thread so the suite stays fast.
    KubernetesMetadataSource src = source;
    KubernetesMockServer srv = server;
    Thread.ofPlatform()
        .daemon()
        .start(
            () -> {
              if (src != null) {
                src.close();
              }
              if (srv != null) {
                srv.destroy();
              }
            });
  }

  static String podWatch(String rv) {
    return "/api/v1/pods?allowWatchBookmarks=true&fieldSelector=spec.nodeName%3Dnode-a&resourceVersion="
        + rv
        + "&timeoutSeconds=600&watch=true";
  }

  static String nodeWatch(String rv) {
    return "/api/v1/nodes?allowWatchBookmarks=true&fieldSelector=metadata.name%3Dnode-a&resourceVersion="
        + rv
        + "&timeoutSeconds=600&watch=true";
  }

  static Pod podA() {
    return new PodBuilder()
        .withNewMetadata()
        .withName("train-0")
        .withNamespace("ml")
        .withUid(UID_A)
        .withResourceVersion("3")
        .withLabels(Map.of("app", "trainer", "secret-label", "x"))
        .endMetadata()
        .withNewSpec()
        .withNodeName(NODE)
        .addNewContainer()
        .withName("trainer")
        .endContainer()
        .addNewInitContainer()
        .withName("setup")
        .endInitContainer()
        .addNewInitContainer()
        .withName("proxy")
        .withRestartPolicy("Always")
        .endInitContainer()
        .endSpec()
        .withNewStatus()
        .withPhase("Running")
        .withQosClass("Burstable")
        .addNewContainerStatus()
        .withName("trainer")
        .withContainerID("containerd://0123abcd")
        .withNewState()
        .withNewRunning()
        .endRunning()
        .endState()
        .endContainerStatus()
        .addNewInitContainerStatus()
        .withName("setup")
        .withContainerID("containerd://feed")
        .withNewState()
        .withNewTerminated()
        .withExitCode(0)
        .endTerminated()
        .endState()
        .endInitContainerStatus()
        .endStatus()
        .build();
  }

  static Pod pod(String uid, String name) {
    return KubeObjects.runningPod(NODE, uid, name, "main", "6");
  }

  static Node node() {
    return new NodeBuilder()
        .withNewMetadata()
        .withName(NODE)
        .withResourceVersion("4")
        .withAnnotations(
            Map.of(
                NodeAnnotations.HANDSHAKE,
                    "Reported_"
                        + java.time.format.DateTimeFormatter.ofPattern("yyyy.MM.dd HH:mm:ss")
                            .withZone(java.time.ZoneOffset.UTC)
                            .format(Instant.now().minusSeconds(30)),
                NodeAnnotations.NVIDIA_REGISTER,
                    "GPU-a,10,32768,100,NVIDIA-A100,0,true:GPU-b,10,32768,100,NVIDIA-A100,0,true:",
                NodeAnnotations.MUTEX_LOCK, "2026-11-26T01:00:00Z"))
        .endMetadata()
        .build();
  }

  /** Expect the node-scoped list and a watch that stays open (emitting {@code events} first). */
  void expectPods(KubernetesMockServer s, List<Pod> listed, Pod... added) {
    for (String path : List.of(POD_LIST, POD_LIST_RETRY)) {
      s.expect()
          .get()
          .withPath(path)
          .andReturn(
              200,
              new PodListBuilder()
                  .withNewMetadata()
                  .withResourceVersion("5")
                  .endMetadata()
                  .withItems(listed)
                  .build())
          .always();
    }
    var ws = s.expect().get().withPath(podWatch("5")).andUpgradeToWebSocket().open();
    for (Pod p : added) {
      ws = ws.waitFor(100).andEmit(new WatchEvent(p, "ADDED"));
    }
    // A script that ends closes the socket; keep it open (teardown closes it asynchronously).
    ws.waitFor(300_000).andEmit(new WatchEvent(podA(), "MODIFIED")).done().always();
  }

  void expectNode(KubernetesMockServer s) {
    for (String path : List.of(NODE_LIST, NODE_LIST_RETRY)) {
      s.expect()
          .get()
          .withPath(path)
          .andReturn(
              200,
              new NodeListBuilder()
                  .withNewMetadata()
                  .withResourceVersion("5")
                  .endMetadata()
                  .withItems(node())
                  .build())
          .always();
    }
    s.expect()
        .get()
        .withPath(nodeWatch("5"))
        .andUpgradeToWebSocket()
        .open()
        .waitFor(600_000)
        .andEmit(new WatchEvent(node(), "MODIFIED"))
        .done()
        .always();
  }

  KubernetesMetadataSource start(KubernetesClient client) {
    source = new KubernetesMetadataSource(client, NODE, List.of("app"), Duration.ofMinutes(5));
    source.start();
    return source;
  }

  @Test
  void start_nodeScopedInformer_joinsPodsContainersAndNodeAnnotations() {
    server = new KubernetesMockServer(false);
    server.init();
    expectPods(server, List.of(podA()));
    expectNode(server);
    KubernetesMetadataSource src = start(server.createClient());
    Await.until(Duration.ofSeconds(60), () -> src.health().up() && src.pod(UID_A).isPresent());
    PodMeta a = src.pod(UID_A).orElseThrow();
    assertThat(a.namespace()).isEqualTo("ml");
    assertThat(a.name()).isEqualTo("train-0");
    assertThat(a.qosClass()).contains("burstable");
    assertThat(a.labels()).isEqualTo(Map.of("app", "trainer")); // allow-listed only
    assertThat(a.container("trainer").orElseThrow().containerId()).contains("0123abcd");
    assertThat(a.container("setup").orElseThrow().kind()).isEqualTo(ContainerMeta.Kind.INIT);
    assertThat(a.container("setup").orElseThrow().state())
        .isEqualTo(ContainerMeta.State.TERMINATED);
    assertThat(a.container("proxy").orElseThrow().kind()).isEqualTo(ContainerMeta.Kind.SIDECAR);
    // The mock closes a watch socket once its script ran, so the watch reconnects now and then:
    // poll for states instead of reading them once.
    Await.until(Duration.ofSeconds(60), () -> src.health().authoritative());
    Await.until(Duration.ofSeconds(60), () -> src.node().known());
    NodeMeta n = src.node();
    assertThat(n.registeredDevices()).hasValue(2);
    assertThat(n.mutexLocked()).isTrue();
    assertThat(n.handshake())
        .hasValueSatisfying(
            t ->
                assertThat(t)
                    .isCloseTo(
                        Instant.now().minusSeconds(30),
                        new org.assertj.core.data.TemporalUnitWithinOffset(5, ChronoUnit.SECONDS)));
  }

  @Test
  void start_rbacForbidsListThenAllows_reportsReasonThenRecoversByItself() {
    server = new KubernetesMockServer(false);
    server.init();
    for (String path : List.of(POD_LIST, POD_LIST_RETRY)) {
      server
          .expect()
          .get()
          .withPath(path)
          .andReturn(
              403,
              new StatusBuilder()
                  .withCode(403)
                  .withReason("Forbidden")
                  .withMessage(
                      "pods is forbidden: User \"system:serviceaccount:x:y\" cannot list resource \"pods\"")
                  .build())
          .times(1);
    }
    expectPods(server, List.of(podA()));
    expectNode(server);
    KubernetesMetadataSource src = start(server.createClient());
    Await.until(
        Duration.ofSeconds(10),
        () -> src.health().problem().map(p -> p.contains("RBAC")).orElse(false));
    assertThat(src.health().up()).isFalse();
    assertThat(src.health().authoritative()).isFalse();
    assertThat(src.pod(UID_A)).isEmpty();
    Await.until(
        Duration.ofSeconds(30),
        () -> src.health().up() && src.pod(UID_A).isPresent() && src.health().problem().isEmpty());
  }

  @Test
  void apiServerDown_thenBack_keepsLastKnownPodsAndReconnectsByItself() throws Exception {
    server = new KubernetesMockServer(false);
    server.init(InetAddress.getLoopbackAddress(), 0);
    int port = server.getPort();
    expectPods(server, List.of(podA()));
    expectNode(server);
    KubernetesMetadataSource src = start(server.createClient());
    Await.until(Duration.ofSeconds(60), () -> src.health().up() && src.pod(UID_A).isPresent());

    KubernetesMockServer first = server;
    server = null;
    Thread.ofPlatform().daemon().start(first::destroy); // waits for open sockets; do not block
    Await.until(Duration.ofSeconds(60), () -> !src.health().up());
    assertThat(src.health().problem()).isPresent();
    assertThat(src.pod(UID_A)).as("last known state still answers").isPresent();

    server = new KubernetesMockServer(false);
    // Whether the informer relists or resumes its watch, pod B must show up.
    Pod b = pod(UID_B, "created-during-outage");
    expectPods(server, List.of(podA(), b), b);
    expectNode(server);
    KubernetesMockServer second = server;
    Await.until(
        Duration.ofSeconds(30),
        () -> {
          second.init(InetAddress.getLoopbackAddress(), port); // throws while the port is held
          return true;
        });
    Await.until(Duration.ofSeconds(60), () -> src.health().up() && src.pod(UID_B).isPresent());
  }

  @Test
  void nodeAnnotations_decoders_acceptKnownSpellingsAndRejectGarbage() {
    assertThat(NodeAnnotations.handshakeTime("Requesting_2026.11.26 01:02:03"))
        .contains(Instant.parse("2026-11-26T01:02:03Z"));
    assertThat(NodeAnnotations.handshakeTime("1700000000"))
        .contains(Instant.ofEpochSecond(1_700_000_000L));
    assertThat(NodeAnnotations.handshakeTime("2026-11-26T01:02:03Z"))
        .contains(Instant.parse("2026-11-26T01:02:03Z"));
    assertThat(NodeAnnotations.handshakeTime("Deleted_yesterday")).isEmpty();
    assertThat(NodeAnnotations.registeredDevices("[{\"id\":\"GPU-a\"},{\"id\":\"GPU-b\"},{}]"))
        .hasValue(3);
    assertThat(NodeAnnotations.registeredDevices("GPU-a,10,32768,100,NVIDIA,0,true:")).hasValue(1);
    assertThat(NodeAnnotations.registeredDevices("not,a")).isEmpty();
    assertThat(NodeAnnotations.registeredDevices("[broken")).isEmpty();
    assertThat(NodeAnnotations.decode(Map.of()).registeredDevices()).hasValue(0);
    assertThat(NodeAnnotations.decode(Map.of()).mutexLocked()).isFalse();
  }

  @net.jqwik.api.Property(tries = 300)
  void nodeAnnotations_anyValue_neverThrows(@net.jqwik.api.ForAll String raw) {
    NodeAnnotations.decode(
        Map.of(NodeAnnotations.HANDSHAKE, raw, NodeAnnotations.NVIDIA_REGISTER, raw));
  }
}
