package io.vgpu.exporter.attribution;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.vgpu.exporter.attribution.DeviceHolders.HeldDevice;
import io.vgpu.exporter.attribution.DeviceHolders.Holders;
import io.vgpu.exporter.attribution.DeviceHolders.UnattributedReason;
import io.vgpu.exporter.discovery.ContainerKey;
import io.vgpu.exporter.k8s.ContainerMeta;
import io.vgpu.exporter.k8s.PodMeta;
import io.vgpu.exporter.kubelet.DeviceAssignment;
import io.vgpu.exporter.kubelet.DeviceId;
import io.vgpu.exporter.kubelet.PodResourcesSnapshot;
import io.vgpu.exporter.kubelet.Sharing;
import io.vgpu.exporter.nvml.GpuIdentity;
import io.vgpu.exporter.nvml.GpuSnapshot;
import io.vgpu.exporter.nvml.MigIds;
import io.vgpu.exporter.nvml.MigInstance;
import io.vgpu.exporter.nvml.NvmlSnapshot;
import io.vgpu.exporter.nvml.NvmlStatus;
import io.vgpu.exporter.nvml.RunningProcess;
import io.vgpu.exporter.nvml.SmActivity;
import io.vgpu.hostpid.ProcessOwner;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalLong;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** Who holds a device without a region, and why a GPU process stays unattributed. */
class DeviceHoldersTest {
  static final String GPU0 = "GPU-00000000-0000-0000-0000-000000000000";
  static final String GPU1 = "GPU-11111111-1111-1111-1111-111111111111";
  static final String MIG = "MIG-22222222-2222-2222-2222-222222222222";
  static final long GIB = 1L << 30;
  static final Instant T = Instant.parse("2026-11-28T00:00:00Z");

  static String uid(int n) {
    return "%08x-0000-4000-8000-%012x".formatted(n, n);
  }

  static String cid(int n) {
    return "%064x".formatted(1000 + n);
  }

  static PodMeta pod(int n, String name, String container) {
    return new PodMeta(
        uid(n),
        "team",
        name,
        "Running",
        Optional.empty(),
        Map.of(),
        Map.of(
            container,
            new ContainerMeta(
                container,
                ContainerMeta.Kind.REGULAR,
                Optional.of(cid(n)),
                ContainerMeta.State.RUNNING)));
  }

  static GpuProcessOwner proc(String gpu, int pid, int pod, boolean attributed) {
    return new GpuProcessOwner(
        gpu,
        pid,
        pod < 0
            ? Optional.empty()
            : Optional.of(new ProcessOwner(pid, 100, uid(pod), Optional.of(cid(pod)), 1)),
        attributed);
  }

  static GpuSnapshot gpu(int index, String uuid, Map<Integer, Long> mem, Map<Integer, Double> sm) {
    return new GpuSnapshot(
        new GpuIdentity(index, -1, uuid, "NVIDIA H100"),
        Optional.empty(),
        OptionalDouble.of(0.5),
        OptionalDouble.empty(),
        Optional.of(
            mem.entrySet().stream()
                .map(e -> new RunningProcess(e.getKey(), OptionalLong.of(e.getValue())))
                .toList()),
        Optional.of(sm));
  }

  static AttributionResult result(List<GpuSnapshot> gpus, List<GpuProcessOwner> procs) {
    return new AttributionResult(
        T,
        new NvmlSnapshot(T, NvmlStatus.up(Optional.of("580.1")), gpus),
        List.of(),
        List.of(),
        History.EMPTY,
        procs);
  }

  static DeviceAssignment claim(String pod, String container, String resource, String id) {
    DeviceId d = DeviceId.parse(id).orElseThrow();
    return new DeviceAssignment(
        "team",
        pod,
        container,
        resource,
        Optional.of(d),
        Sharing.of(resource, d),
        d.mig() ? resource.substring(resource.indexOf("mig-") + 4) : "",
        "");
  }

  static PodResourcesSnapshot answer(DeviceAssignment... a) {
    return new PodResourcesSnapshot(T, List.of(a), Map.of(), a.length, 0, false);
  }

  @Test
  void kubeletClaims_processesAttributedToTheirClaim_idleClaimHasZeroBytes_restByReason() {
    var gpus =
        List.of(
            gpu(0, GPU0, Map.of(501, 3 * GIB, 601, GIB, 701, GIB), Map.of(501, 0.4, 601, 0.1)),
            gpu(1, GPU1, Map.of(801, 2 * GIB, 901, GIB), Map.of(801, 0.2)));
    var procs =
        List.of(
            proc(GPU0, 501, 5, false), // whole-GPU pod on its claim
            proc(GPU0, 601, 6, false), // a pod on GPU0 with no claim of it
            proc(GPU0, 701, -1, false), // a host process
            proc(GPU1, 801, 8, false), // a time-sliced replica holder
            proc(GPU1, 901, 1, true)); // a region container's: not the holders' business
    Holders h =
        DeviceHolders.of(
            result(gpus, procs),
            Optional.of(
                answer(
                    claim("whole", "torch", "nvidia.com/gpu", GPU0),
                    claim("idle", "main", "nvidia.com/gpu", GPU1),
                    claim("shared", "main", "nvidia.com/gpu.shared", GPU1 + "::3"),
                    claim("other", "main", "nvidia.com/gpu", GPU1),
                    claim("mig", "main", "nvidia.com/mig-1g.10gb", MIG))),
            List.of(
                pod(5, "whole", "torch"),
                pod(6, "other", "main"),
                pod(7, "idle", "main"),
                pod(8, "shared", "main"),
                pod(9, "mig", "main")),
            Set.of());

    assertThat(h.held())
        .extracting(HeldDevice::pod, HeldDevice::sharing, HeldDevice::memoryBytes)
        .containsExactly(
            org.assertj.core.groups.Tuple.tuple("whole", Sharing.WHOLE, 3 * GIB),
            org.assertj.core.groups.Tuple.tuple("idle", Sharing.WHOLE, 0L),
            org.assertj.core.groups.Tuple.tuple("shared", Sharing.TIMESLICE, 2 * GIB),
            org.assertj.core.groups.Tuple.tuple("other", Sharing.WHOLE, 0L),
            org.assertj.core.groups.Tuple.tuple("mig", Sharing.MIG, 0L));
    HeldDevice whole = h.held().get(0);
    assertThat(whole.podUid()).isEqualTo(uid(5));
    assertThat(whole.deviceIndex()).isZero();
    assertThat(whole.smUtilization().getAsDouble()).isCloseTo(0.4, within(1e-9));
    assertThat(whole.hostPids()).containsExactly(501);
    HeldDevice idle = h.held().get(1);
    assertThat(idle.smUtilization().getAsDouble()).isZero();
    assertThat(idle.hostPids()).isEmpty();
    HeldDevice mig = h.held().get(4);
    assertThat(mig.migProfile()).isEqualTo("1g.10gb");
    assertThat(mig.deviceIndex()).isEqualTo(-1);
    assertThat(mig.unknown()).contains(UnknownReason.GPU_NOT_IN_NVML);

    // pod 6 runs on GPU0 but its claim is GPU1: unattributed, not given to anyone.
    assertThat(h.unattributed().get(GPU0))
        .containsExactlyInAnyOrderEntriesOf(
            Map.of(UnattributedReason.NO_CLAIM, 1, UnattributedReason.NOT_IN_A_POD, 1));
    assertThat(h.unattributedBytes().get(GPU0)).isEqualTo(2 * GIB);
    assertThat(h.unattributed()).doesNotContainKey(GPU1);
  }

  @Test
  void noKubeletAnswer_aPodProcessIsAttributedByItsCgroupAsWhole_unknownPodsStayUnattributed() {
    var gpus = List.of(gpu(0, GPU0, Map.of(501, 3 * GIB, 601, GIB), Map.of(501, 0.4)));
    var procs = List.of(proc(GPU0, 501, 5, false), proc(GPU0, 601, 6, false));
    Holders h =
        DeviceHolders.of(
            result(gpus, procs), Optional.empty(), List.of(pod(5, "whole", "torch")), Set.of());
    assertThat(h.held()).hasSize(1);
    HeldDevice whole = h.held().getFirst();
    assertThat(whole.sharing()).isEqualTo(Sharing.WHOLE);
    assertThat(whole.container()).isEqualTo("torch");
    assertThat(whole.deviceUuid()).isEqualTo(GPU0);
    assertThat(whole.memoryBytes()).isEqualTo(3 * GIB);
    assertThat(h.unattributed().get(GPU0))
        .containsExactly(Map.entry(UnattributedReason.POD_UNKNOWN, 1));
  }

  @Test
  void regionContainersAreLeftToTheirRegions_aProcessOfTheirsNoSlotHoldsIsNoClaim() {
    var gpus = List.of(gpu(0, GPU0, Map.of(501, GIB), Map.of()));
    var procs = List.of(proc(GPU0, 501, 5, false));
    Holders h =
        DeviceHolders.of(
            result(gpus, procs),
            Optional.of(answer(claim("vgpu", "torch", "nvidia.com/vgpu", GPU0 + "-1"))),
            List.of(pod(5, "vgpu", "torch")),
            Set.of(new ContainerKey(uid(5), "torch")));
    assertThat(h.held()).isEmpty();
    assertThat(h.unattributed().get(GPU0))
        .containsExactly(Map.entry(UnattributedReason.NO_CLAIM, 1));
  }

  @Test
  void nvmlDown_everyHeldDeviceIsVisibleWithUtilizationUnknown() {
    AttributionResult down =
        new AttributionResult(
            T,
            NvmlSnapshot.unavailable(T, "nvmlInit failed"),
            List.of(),
            List.of(),
            History.EMPTY,
            List.of());
    Holders h =
        DeviceHolders.of(
            down,
            Optional.of(answer(claim("whole", "torch", "nvidia.com/gpu", GPU0))),
            List.of(),
            Set.of());
    assertThat(h.held())
        .singleElement()
        .satisfies(
            d -> {
              assertThat(d.podUid()).isEmpty(); // the metadata does not know the pod yet
              assertThat(d.memoryBytes()).isZero();
              assertThat(d.unknown()).contains(UnknownReason.NVML_UNAVAILABLE);
            });
  }

  @Test
  void aContainerIdOfNoContainerOfThePod_isContainerUnknown() {
    var gpus = List.of(gpu(0, GPU0, Map.of(501, GIB), Map.of()));
    var procs =
        List.of(
            new GpuProcessOwner(
                GPU0,
                501,
                Optional.of(new ProcessOwner(501, 100, uid(5), Optional.of(cid(99)), 1)),
                false));
    Holders h =
        DeviceHolders.of(
            result(gpus, procs), Optional.empty(), List.of(pod(5, "whole", "torch")), Set.of());
    assertThat(h.held()).isEmpty();
    assertThat(h.unattributed().get(GPU0))
        .containsExactly(Map.entry(UnattributedReason.CONTAINER_UNKNOWN, 1));
  }

  /** A MIG device of GPU0 in NVML's snapshot, its profile named by NVML. */
  static GpuSnapshot mig(Map<Integer, Long> mem) {
    return gpu(0, MIG, mem, Map.of())
        .withMig(
            new MigInstance(
                GPU0,
                Optional.of(new MigIds(9, 0)),
                "1g.10gb",
                SmActivity.unknown(SmActivity.Reason.FIRST_SAMPLE)));
  }

  /** Pod 5's process 501 on the MIG device (2 GiB), held as the kubelet {@code answer} says. */
  static Holders onMig(Optional<PodResourcesSnapshot> answer) {
    var gpus = List.of(gpu(0, GPU0, Map.of(), Map.of()), mig(Map.of(501, 2 * GIB)));
    return DeviceHolders.of(
        result(gpus, List.of(proc(MIG, 501, 5, false))),
        answer,
        List.of(pod(5, "small", "infer")),
        Set.of());
  }

  @Test
  void migDevice_singleStrategyClaim_profileFromNvml_memoryOnTheMigDevice() {
    Holders h =
        onMig(
            Optional.of(
                answer(
                    new DeviceAssignment(
                        "team",
                        "small",
                        "infer",
                        "nvidia.com/gpu",
                        DeviceId.parse(MIG),
                        Sharing.MIG,
                        "", // the single strategy's resource name carries no profile
                        ""))));
    assertThat(h.held())
        .singleElement()
        .satisfies(
            d -> {
              assertThat(d.sharing()).isEqualTo(Sharing.MIG);
              assertThat(d.migProfile()).as("NVML's profile").isEqualTo("1g.10gb");
              assertThat(d.deviceUuid()).isEqualTo(MIG);
              assertThat(d.memoryBytes()).isEqualTo(2 * GIB);
              assertThat(d.hostPids()).containsExactly(501);
            });
    assertThat(h.unattributed()).isEmpty();
  }

  @Test
  void migDevice_noKubeletAnswer_attributedByCgroupAsMig_withNvmlProfile() {
    assertThat(onMig(Optional.empty()).held())
        .singleElement()
        .satisfies(
            d -> {
              assertThat(d.sharing()).isEqualTo(Sharing.MIG);
              assertThat(d.migProfile()).isEqualTo("1g.10gb");
              assertThat(d.memoryBytes()).isEqualTo(2 * GIB);
            });
  }
}
