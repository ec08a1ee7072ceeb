package io.vgpu.exporter.metrics;

import static io.vgpu.exporter.testing.TestNode.UID_SERVE;
import static io.vgpu.exporter.testing.TestNode.UID_TRAIN;
import static org.assertj.core.api.Assertions.assertThat;

import io.prometheus.metrics.model.registry.PrometheusRegistry;
import io.vgpu.exporter.kubelet.DeviceAssignment;
import io.vgpu.exporter.kubelet.DeviceId;
import io.vgpu.exporter.kubelet.PodResourcesSnapshot;
import io.vgpu.exporter.kubelet.PodResourcesState;
import io.vgpu.exporter.kubelet.Sharing;
import io.vgpu.exporter.testing.Samples;
import io.vgpu.exporter.testing.TestNode;
import io.vgpu.exporter.testing.TestRegions;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** vgpu_container_device_info from regions and from the kubelet's pod-resources assignment. */
class DeviceHoldingCollectorTest {
  static final String FAMILY = "vgpu_container_device_info";
  static final String WHOLE = "GPU-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
  static final String MIG = "MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";

  @TempDir Path root;

  private static DeviceAssignment plugin(
      String ns, String pod, String container, String resource, String id, String profile) {
    var device = DeviceId.parse(id).orElseThrow();
    return new DeviceAssignment(
        ns,
        pod,
        container,
        resource,
        Optional.of(device),
        Sharing.of(resource, device),
        profile,
        "");
  }

  private static PodResourcesState answer(DeviceAssignment... assignments) {
    return new PodResourcesState(
        true,
        Optional.of(
            new PodResourcesSnapshot(
                TestNode.NOW, List.of(assignments), Map.of(), assignments.length, 0, false)),
        Optional.empty());
  }

  private static Samples scrape(TestNode node, AtomicReference<PodResourcesState> state)
      throws Exception {
    var registry = new PrometheusRegistry();
    registry.register(
        new DeviceHoldingCollector(node.states, state::get, () -> node.metadata.pods()));
    return Samples.parse(TestNode.text(registry));
  }

  @Test
  void regionContainersHoldTheirDevicesAsVgpuAndOthersAsTheKubeletSays() throws Exception {
    var node = new TestNode(root);
    var state =
        new AtomicReference<>(
            answer(
                // the region container, also in pod-resources (a HAMi slot): reported once, vgpu
                plugin(
                    "ml", "train-0", "trainer", "nvidia.com/gpu", TestRegions.uuid(0) + "-3", ""),
                // a known pod's second container holding a whole GPU: pod_uid from the metadata
                plugin("inference", "serve-1", "sidecar", "nvidia.com/gpu", WHOLE, ""),
                // an unknown pod on a MIG device and a time-slicing replica
                plugin("team-b", "infer-1", "server", "nvidia.com/mig-1g.10gb", MIG, "1g.10gb"),
                plugin("team-c", "nb", "jupyter", "nvidia.com/gpu", WHOLE + "::2", ""),
                // a DRA claim naming no GPU
                new DeviceAssignment(
                    "team-d",
                    "dra",
                    "main",
                    "gpu.example.com",
                    Optional.empty(),
                    Sharing.DRA,
                    "",
                    "team-d/claim")));
    Samples s = scrape(node, state);

    assertThat(
            s.find(FAMILY, "pod", "train-0").stream()
                .map(x -> x.labels().get("device_uuid") + " " + x.labels().get("sharing"))
                .toList())
        .containsExactlyInAnyOrder(TestRegions.uuid(0) + " vgpu", TestRegions.uuid(1) + " vgpu");
    assertThat(s.find(FAMILY, "pod", "train-0", "pod_uid", UID_TRAIN)).hasSize(2);
    assertThat(s.value(FAMILY, "pod", "serve-1", "container", "server", "sharing", "vgpu"))
        .isEqualTo(1.0);
    assertThat(
            s.value(
                FAMILY,
                "pod",
                "serve-1",
                "container",
                "sidecar",
                "pod_uid",
                UID_SERVE,
                "device_uuid",
                WHOLE,
                "sharing",
                "whole",
                "mig_profile",
                ""))
        .isEqualTo(1.0);
    assertThat(
            s.value(
                FAMILY,
                "namespace",
                "team-b",
                "pod_uid",
                "",
                "device_uuid",
                MIG,
                "sharing",
                "mig",
                "mig_profile",
                "1g.10gb",
                "node",
                "node-a"))
        .isEqualTo(1.0);
    assertThat(s.value(FAMILY, "pod", "nb", "device_uuid", WHOLE, "sharing", "timeslice"))
        .isEqualTo(1.0);
    assertThat(s.value(FAMILY, "pod", "dra", "device_uuid", "", "sharing", "dra")).isEqualTo(1.0);
    // The finished pod's container holds nothing any more.
    assertThat(s.find(FAMILY, "pod", "prep-done")).isEmpty();

    // Without the kubelet only the regions speak; the kubelet's containers go with its answer.
    state.set(PodResourcesState.DISABLED);
    Samples off = scrape(node, state);
    assertThat(off.named(FAMILY)).allMatch(x -> x.labels().get("sharing").equals("vgpu"));
    assertThat(off.find(FAMILY, "pod", "train-0")).hasSize(2);
    assertThat(off.find(FAMILY, "pod", "nb")).isEmpty();
  }
}
