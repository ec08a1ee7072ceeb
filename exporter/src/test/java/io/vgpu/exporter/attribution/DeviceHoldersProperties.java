package io.vgpu.exporter.attribution;

import static io.vgpu.exporter.attribution.DeviceHoldersTest.GPU0;
import static io.vgpu.exporter.attribution.DeviceHoldersTest.GPU1;
import static io.vgpu.exporter.attribution.DeviceHoldersTest.claim;
import static io.vgpu.exporter.attribution.DeviceHoldersTest.gpu;
import static io.vgpu.exporter.attribution.DeviceHoldersTest.pod;
import static io.vgpu.exporter.attribution.DeviceHoldersTest.proc;
import static io.vgpu.exporter.attribution.DeviceHoldersTest.result;
import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.attribution.DeviceHolders.HeldDevice;
import io.vgpu.exporter.attribution.DeviceHolders.Holders;
import io.vgpu.exporter.k8s.PodMeta;
import io.vgpu.exporter.kubelet.DeviceAssignment;
import io.vgpu.exporter.kubelet.PodResourcesSnapshot;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;

/**
 * Invariants of {@link DeviceHolders} over random nodes (processes of random pods, some in no pod,
 * some already a region's; random claims; pods the metadata does or does not know): nothing is
 * counted twice or lost, and with a kubelet answer nobody gets a device without a claim.
 */
class DeviceHoldersProperties {
  private static final String[] GPUS = {GPU0, GPU1};

  /**
   * @param procs each: pod (0-5, 5 = no pod), GPU (0-1), memory MiB, attributed to a region (0/1)
   * @param claims each: pod (0-4), GPU (0-1)
   * @param known pods 0-4 the metadata knows (bit mask)
   */
  @Property(tries = 300)
  void everyProcessIsHeldOnceOrUnattributed_bytesAddUp_claimsRespected(
      @ForAll @Size(max = 12) List<@IntRange(min = 0, max = 4095) Integer> procs,
      @ForAll @Size(max = 8) List<@IntRange(min = 0, max = 9) Integer> claims,
      @ForAll @IntRange(min = 0, max = 31) int known,
      @ForAll boolean answered) {
    Map<Integer, Long> mem0 = new HashMap<>();
    Map<Integer, Long> mem1 = new HashMap<>();
    List<GpuProcessOwner> owners = new ArrayList<>();
    long freeBytes = 0;
    int free = 0;
    int pid = 100;
    for (int p : procs) {
      int pod = p % 6;
      int g = (p / 6) % 2;
      long bytes = ((p / 12) % 64 + 1) * (1L << 20);
      boolean attributed = (p / 768) % 2 == 1;
      pid++;
      (g == 0 ? mem0 : mem1).put(pid, bytes);
      owners.add(proc(GPUS[g], pid, pod == 5 ? -1 : pod + 10, attributed));
      if (!attributed) {
        free++;
        freeBytes += bytes;
      }
    }
    List<DeviceAssignment> assignments = new ArrayList<>();
    Set<String> claimed = new HashSet<>();
    for (int c : claims) {
      int pod = c % 5;
      String uuid = GPUS[c / 5];
      if (claimed.add(pod + "/" + uuid)) {
        assignments.add(claim("p" + pod, "main", "nvidia.com/gpu", uuid));
      }
    }
    List<PodMeta> pods = new ArrayList<>();
    for (int i = 0; i < 5; i++) {
      if ((known & (1 << i)) != 0) {
        pods.add(pod(i + 10, "p" + i, "main"));
      }
    }
    Optional<PodResourcesSnapshot> answer =
        answered
            ? Optional.of(
                new PodResourcesSnapshot(
                    Instant.EPOCH, assignments, Map.of(), assignments.size(), 0, false))
            : Optional.empty();
    Holders h =
        DeviceHolders.of(
            result(List.of(gpu(0, GPU0, mem0, Map.of()), gpu(1, GPU1, mem1, Map.of())), owners),
            answer,
            pods,
            Set.of());

    Set<Integer> heldPids = new HashSet<>();
    long heldBytes = 0;
    Set<String> rows = new HashSet<>();
    for (HeldDevice d : h.held()) {
      assertThat(
              rows.add(d.namespace() + "/" + d.pod() + "/" + d.container() + "/" + d.deviceUuid()))
          .as("one row per container and device")
          .isTrue();
      for (int x : d.hostPids()) {
        assertThat(heldPids.add(x)).as("pid %d held once", x).isTrue();
      }
      heldBytes += d.memoryBytes();
      if (answered) {
        assertThat(claimed).contains(d.pod().substring(1) + "/" + d.deviceUuid());
      }
    }
    int unattributed =
        h.unattributed().values().stream()
            .flatMap(m -> m.values().stream())
            .mapToInt(Integer::intValue)
            .sum();
    long unattributedBytes =
        h.unattributedBytes().values().stream().mapToLong(Long::longValue).sum();
    assertThat(heldPids.size() + unattributed)
        .as("held + unattributed = free processes")
        .isEqualTo(free);
    assertThat(heldBytes + unattributedBytes).isEqualTo(freeBytes);
    for (GpuProcessOwner o : owners) {
      if (o.attributed()) {
        assertThat(heldPids).doesNotContain(o.hostPid());
      }
    }
    if (answered) {
      assertThat(h.held()).hasSize(assignments.size()); // every claim visible, processes or not
    }
  }
}
