package io.vgpu.exporter.kubelet;

import static io.vgpu.exporter.demo.FakeKubelet.pod;
import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.demo.FakeKubelet;
import io.vgpu.kubelet.podresources.v1.AllocatableResourcesResponse;
import io.vgpu.kubelet.podresources.v1.CDIDevice;
import io.vgpu.kubelet.podresources.v1.ClaimResource;
import io.vgpu.kubelet.podresources.v1.ContainerDevices;
import io.vgpu.kubelet.podresources.v1.ContainerResources;
import io.vgpu.kubelet.podresources.v1.DynamicResource;
import io.vgpu.kubelet.podresources.v1.ListPodResourcesResponse;
import io.vgpu.kubelet.podresources.v1.PodResources;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;
import java.time.Duration;
import java.time.InstantSource;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The pod-resources client and poller against a real gRPC server on a unix socket. */
class PodResourcesSourceTest {
  static final String GPU0 = "GPU-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
  static final String GPU1 = "GPU-11111111-2222-3333-4444-555555555555";
  static final String MIG0 = "MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";

  /** Production's deadline: a first call (connect, class loading) on a loaded 2-core VM fits. */
  static final Duration TIMEOUT = Duration.ofSeconds(2);

  @TempDir Path dir;

  private PodResourcesSource source(Path socket, PodResourcesLimits limits) {
    return new PodResourcesSource(
        socket, Duration.ofMillis(100), TIMEOUT, limits, InstantSource.system(), "node-1");
  }

  @Test
  void listMapsEveryDeviceFormToItsContainer() throws Exception {
    Path socket = dir.resolve("kubelet.sock");
    try (var kubelet = new FakeKubelet(socket);
        var source = source(socket, PodResourcesLimits.DEFAULT)) {
      var dra =
          PodResources.newBuilder()
              .setNamespace("ml")
              .setName("dra-pod")
              .addContainers(
                  ContainerResources.newBuilder()
                      .setName("main")
                      .addDynamicResources(
                          DynamicResource.newBuilder()
                              .setClaimNamespace("ml")
                              .setClaimName("gpu-claim")
                              .addClaimResources(
                                  ClaimResource.newBuilder()
                                      .setDriverName("gpu.nvidia.com")
                                      .setPoolName("node-1")
                                      .setDeviceName("gpu-1")
                                      .addCdiDevices(
                                          CDIDevice.newBuilder()
                                              .setName("k8s.gpu.nvidia.com/device=" + GPU1)))))
              .build();
      kubelet.setList(
          ListPodResourcesResponse.newBuilder()
              .addPodResources(pod("team-a", "trainer-0", "torch", "nvidia.com/gpu", GPU0))
              .addPodResources(pod("team-b", "infer-1", "server", "nvidia.com/mig-1g.10gb", MIG0))
              .addPodResources(pod("team-c", "notebook", "jupyter", "nvidia.com/gpu", GPU1 + "::3"))
              .addPodResources(
                  pod("team-d", "mps-job", "worker", "nvidia.com/gpu.mps", GPU1 + "::0"))
              .addPodResources(pod("team-e", "vgpu-pod", "app", "nvidia.com/gpu", GPU1 + "-7"))
              .addPodResources(
                  pod("kube-system", "nic", "sriov", "intel.com/sriov", "0000:3b:00.1"))
              .addPodResources(dra)
              .build());
      kubelet.setAllocatable(
          AllocatableResourcesResponse.newBuilder()
              .addDevices(
                  ContainerDevices.newBuilder()
                      .setResourceName("nvidia.com/gpu")
                      .addDeviceIds(GPU0)
                      .addDeviceIds(GPU1 + "::3"))
              .build());

      assertThat(source.pollOnce()).as("%s", source.state()).isTrue();
      var state = source.state();
      assertThat(state.problem()).isEmpty();
      var snap = state.snapshot().orElseThrow();
      assertThat(snap.pods()).isEqualTo(7);
      assertThat(snap.rejected()).isZero();
      assertThat(snap.assignments())
          .extracting(
              a ->
                  a.namespace()
                      + "/"
                      + a.pod()
                      + "/"
                      + a.container()
                      + " "
                      + a.deviceUuid().orElse("?")
                      + " "
                      + a.sharing().label()
                      + " "
                      + a.migProfile()
                      + " "
                      + a.claim())
          .containsExactly(
              "team-a/trainer-0/torch " + GPU0 + " whole  ",
              "team-b/infer-1/server " + MIG0 + " mig 1g.10gb ",
              "team-c/notebook/jupyter " + GPU1 + " timeslice  ",
              "team-d/mps-job/worker " + GPU1 + " mps  ",
              "team-e/vgpu-pod/app " + GPU1 + " vgpu  ",
              "ml/dra-pod/main " + GPU1 + " dra  ml/gpu-claim");
      assertThat(snap.byDeviceUuid().get(GPU1)).hasSize(4);
      assertThat(snap.allocatable()).containsOnlyKeys("nvidia.com/gpu");
      assertThat(snap.allocatable().get("nvidia.com/gpu")).containsExactly(GPU0, GPU1 + "::3");
    }
  }

  @Test
  void missingSocketIsAProblemAndTheKubeletIsFoundOnceItAppears() throws Exception {
    Path socket = dir.resolve("kubelet.sock");
    try (var source = source(socket, PodResourcesLimits.DEFAULT)) {
      assertThat(source.pollOnce()).isFalse();
      assertThat(source.state().problem())
          .hasValueSatisfying(p -> assertThat(p).contains("missing"));
      assertThat(source.state().snapshot()).isEmpty();
      source.start();
      try (var kubelet = new FakeKubelet(socket)) {
        kubelet.setList(
            ListPodResourcesResponse.newBuilder()
                .addPodResources(pod("a", "p", "c", "nvidia.com/gpu", GPU0))
                .build());
        long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
        while (source.state().snapshot().isEmpty() && System.nanoTime() < deadline) {
          Thread.sleep(20);
        }
        assertThat(source.state().snapshot()).isPresent();
        assertThat(source.state().problem()).isEmpty();
      }
    }
  }

  @Test
  void aHungKubeletIsBoundedByTheDeadlineAndNeverBlocksAReader() throws Exception {
    Path socket = dir.resolve("kubelet.sock");
    try (var kubelet = new FakeKubelet(socket);
        var source = source(socket, PodResourcesLimits.DEFAULT)) {
      kubelet.setList(
          ListPodResourcesResponse.newBuilder()
              .addPodResources(pod("a", "p", "c", "nvidia.com/gpu", GPU0))
              .build());
      assertThat(source.pollOnce()).as("%s", source.state()).isTrue();
      kubelet.hang();
      long start = System.nanoTime();
      assertThat(source.pollOnce()).isFalse();
      Duration took = Duration.ofNanos(System.nanoTime() - start);
      assertThat(took).isBetween(TIMEOUT.minusMillis(50), TIMEOUT.plusSeconds(2));
      assertThat(source.state().problem())
          .hasValueSatisfying(p -> assertThat(p).contains("DEADLINE_EXCEEDED"));
      // The last good answer stays (younger than the max age) while the kubelet is wedged.
      assertThat(source.state().snapshot()).isPresent();

      // While the poll thread waits on the hung kubelet, readers get the cached state at once.
      source.start();
      int before = kubelet.listCalls();
      long waitUntil = System.nanoTime() + Duration.ofSeconds(5).toNanos();
      while (kubelet.listCalls() == before && System.nanoTime() < waitUntil) {
        Thread.sleep(5);
      }
      assertThat(kubelet.listCalls()).as("poll in flight").isGreaterThan(before);
      long readStart = System.nanoTime();
      for (int i = 0; i < 1000; i++) {
        source.state();
      }
      assertThat(Duration.ofNanos(System.nanoTime() - readStart))
          .isLessThan(Duration.ofMillis(200));
    }
  }

  @Test
  void garbageRepliesAreAFailedPollNotACrash() throws Exception {
    Path socket = dir.resolve("junk.sock");
    var random = new Random(28);
    try (var server = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
      server.bind(UnixDomainSocketAddress.of(socket));
      var junkWriter =
          Thread.ofPlatform()
              .daemon()
              .start(
                  () -> {
                    while (!Thread.currentThread().isInterrupted()) {
                      try (SocketChannel c = server.accept()) {
                        byte[] junk = new byte[64 << 10];
                        random.nextBytes(junk);
                        // An HTTP/1 line first, then noise: neither is an HTTP/2 preface.
                        c.write(ByteBuffer.wrap("HTTP/1.1 200 OK\r\n\r\n".getBytes(UTF_8)));
                        c.write(ByteBuffer.wrap(junk));
                      } catch (java.io.IOException e) {
                        return;
                      }
                    }
                  });
      try (var source = source(socket, PodResourcesLimits.DEFAULT)) {
        for (int i = 0; i < 3; i++) {
          long start = System.nanoTime();
          assertThat(source.pollOnce()).isFalse();
          assertThat(Duration.ofNanos(System.nanoTime() - start))
              .isLessThan(TIMEOUT.plusSeconds(2));
          assertThat(source.state().problem()).isPresent();
          assertThat(source.state().problem().get()).matches("[\\x20-\\x7e]*");
          assertThat(source.state().snapshot()).isEmpty();
        }
      } finally {
        junkWriter.interrupt();
      }
    }
  }

  @Test
  void tenThousandPodsAreReadInOnePoll() throws Exception {
    Path socket = dir.resolve("kubelet.sock");
    try (var kubelet = new FakeKubelet(socket);
        var _ = source(socket, PodResourcesLimits.DEFAULT)) {
      var list = ListPodResourcesResponse.newBuilder();
      for (int i = 0; i < 10_000; i++) {
        String uuid = String.format("GPU-%08x-0000-4000-8000-%012x", i / 8, i);
        list.addPodResources(
            pod("ns-" + (i % 50), "pod-" + i, "main", "nvidia.com/gpu", uuid + "::" + (i % 8)));
      }
      kubelet.setList(list.build());
      var slow =
          new PodResourcesSource(
              socket,
              Duration.ofSeconds(1),
              Duration.ofSeconds(10),
              PodResourcesLimits.DEFAULT,
              InstantSource.system(),
              "node-1");
      try (slow) {
        long start = System.nanoTime();
        assertThat(slow.pollOnce()).as("%s", slow.state()).isTrue();
        long ms = Duration.ofNanos(System.nanoTime() - start).toMillis();
        var snap = slow.state().snapshot().orElseThrow();
        assertThat(snap.pods()).isEqualTo(10_000);
        assertThat(snap.assignments()).hasSize(10_000);
        assertThat(snap.truncated()).isFalse();
        assertThat(snap.of("ns-7", "pod-9957", "main"))
            .singleElement()
            .satisfies(a -> assertThat(a.sharing()).isEqualTo(Sharing.TIMESLICE));
        System.out.println("10000 pods: first poll " + ms + " ms");
      }
    }
  }

  @Test
  void answersOverTheLimitsAreCutAndSaidSo() throws Exception {
    Path socket = dir.resolve("kubelet.sock");
    try (var kubelet = new FakeKubelet(socket)) {
      var list = ListPodResourcesResponse.newBuilder();
      for (int i = 0; i < 101; i++) {
        list.addPodResources(pod("ns", "pod-" + i, "main", "nvidia.com/gpu", GPU0 + "::" + i));
      }
      kubelet.setList(list.build());
      try (var source = source(socket, new PodResourcesLimits(16 << 20, 100, 1000))) {
        assertThat(source.pollOnce()).as("%s", source.state()).isTrue();
        var snap = source.state().snapshot().orElseThrow();
        assertThat(snap.pods()).isEqualTo(100);
        assertThat(snap.assignments()).hasSize(100);
        assertThat(snap.truncated()).isTrue();
        assertThat(source.state().problem())
            .hasValueSatisfying(p -> assertThat(p).contains("limit"));
      }
      // At the limits exactly nothing is lost and nothing is said.
      try (var source = source(socket, new PodResourcesLimits(16 << 20, 101, 101))) {
        assertThat(source.pollOnce()).as("%s", source.state()).isTrue();
        assertThat(source.state().snapshot().orElseThrow().truncated()).isFalse();
        assertThat(source.state().snapshot().orElseThrow().assignments()).hasSize(101);
        assertThat(source.state().problem()).isEmpty();
      }
      try (var source = source(socket, new PodResourcesLimits(16 << 20, 1000, 99))) {
        assertThat(source.pollOnce()).as("%s", source.state()).isTrue();
        assertThat(source.state().snapshot().orElseThrow().assignments()).hasSize(99);
        assertThat(source.state().snapshot().orElseThrow().truncated()).isTrue();
      }
      // A reply over the message limit is refused by gRPC before it is parsed.
      try (var source = source(socket, new PodResourcesLimits(1024, 1000, 1000))) {
        assertThat(source.pollOnce()).isFalse();
        assertThat(source.state().problem())
            .hasValueSatisfying(p -> assertThat(p).contains("RESOURCE_EXHAUSTED"));
      }
    }
  }

  @Test
  void malformedNamesAndIdsAreCountedNotKept() throws Exception {
    Path socket = dir.resolve("kubelet.sock");
    try (var kubelet = new FakeKubelet(socket);
        var source = source(socket, PodResourcesLimits.DEFAULT)) {
      List<PodResources> pods = new ArrayList<>();
      pods.add(pod("Bad_NS", "p", "c", "nvidia.com/gpu", GPU0));
      pods.add(pod("ns", "p\u001b[2J", "c", "nvidia.com/gpu", GPU0));
      pods.add(pod("ns", "p", "c".repeat(64), "nvidia.com/gpu", GPU0));
      pods.add(pod("ns", "p", "c", "nvidia.com/gpu", "GPU-not-a-uuid", GPU0 + "::x", GPU1));
      pods.add(pod("ns", "q", "c", "nvidia.com/gpu\n", GPU0));
      kubelet.setList(ListPodResourcesResponse.newBuilder().addAllPodResources(pods).build());
      assertThat(source.pollOnce()).as("%s", source.state()).isTrue();
      var snap = source.state().snapshot().orElseThrow();
      assertThat(snap.rejected()).isEqualTo(6);
      assertThat(snap.assignments())
          .singleElement()
          .satisfies(a -> assertThat(a.deviceUuid()).hasValue(GPU1));
    }
  }

  @Test
  void anAnswerOlderThanTheMaxAgeIsDropped() throws Exception {
    Path socket = dir.resolve("kubelet.sock");
    var now =
        new java.util.concurrent.atomic.AtomicReference<>(
            java.time.Instant.parse("2026-11-27T20:00:00Z"));
    InstantSource clock = now::get;
    try (var kubelet = new FakeKubelet(socket);
        var source =
            new PodResourcesSource(
                socket, Duration.ofSeconds(5), TIMEOUT, PodResourcesLimits.DEFAULT, clock, "n")) {
      kubelet.setList(
          ListPodResourcesResponse.newBuilder()
              .addPodResources(pod("a", "p", "c", "nvidia.com/gpu", GPU0))
              .build());
      assertThat(source.pollOnce()).as("%s", source.state()).isTrue();
      now.set(now.get().plusSeconds(19)); // 3 intervals + 2 timeouts = 19 s: still good
      assertThat(source.state().snapshot()).isPresent();
      now.set(now.get().plusMillis(1));
      assertThat(source.state().snapshot()).isEmpty();
      assertThat(source.state().problem()).isPresent();
    }
  }
}
