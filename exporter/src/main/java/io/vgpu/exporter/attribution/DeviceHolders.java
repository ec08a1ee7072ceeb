package io.vgpu.exporter.attribution;

import io.vgpu.exporter.discovery.ContainerKey;
import io.vgpu.exporter.k8s.ContainerMeta;
import io.vgpu.exporter.k8s.PodMeta;
import io.vgpu.exporter.kubelet.DeviceAssignment;
import io.vgpu.exporter.kubelet.PodResourcesSnapshot;
import io.vgpu.exporter.kubelet.Sharing;
import io.vgpu.exporter.nvml.GpuSnapshot;
import io.vgpu.exporter.nvml.MigInstance;
import io.vgpu.exporter.nvml.NvmlSnapshot;
import io.vgpu.exporter.text.SnakeCaseLabel;
import io.vgpu.hostpid.ProcessOwner;
import java.util.ArrayList;
import java.util.Collection;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.Set;

/**
 * Containers that hold a GPU without a shared region (a whole GPU, a MIG device, a time-slicing or
 * MPS replica, a DRA claim, or a GPU process in a pod with no library): who they are, how they hold
 * each device, and what NVML says they use on it. A function of one reconciliation's GPU processes
 * (each with its pod by cgroup), the kubelet's pod-resources answer and the pod metadata; it reads
 * nothing itself, so a scrape can call it.
 *
 * <p>The rules:
 *
 * <ul>
 *   <li>Every device the kubelet assigns to a container without a region is a {@link HeldDevice},
 *       with 0 bytes while none of its processes runs there.
 *   <li>A GPU process no region container holds is given to the container its cgroup names (the pod
 *       by UID, the container by the runtime id in the pod's status). When the kubelet has
 *       answered, only if that container holds a claim on that GPU; otherwise it stays unattributed
 *       with {@link UnattributedReason#NO_CLAIM}. Without an answer (pod-resources off or down),
 *       the cgroup alone attributes it, as {@code sharing="whole"} ({@code "mig"} on a MIG device).
 *   <li>A MIG device's profile is the resource name's (mixed strategy) or else the one NVML names
 *       the device by (single strategy: {@code nvidia.com/gpu} carries no profile).
 *   <li>A process in no pod, in a pod or container the metadata does not name, stays unattributed
 *       with its reason.
 * </ul>
 *
 * <p>Cost: one pass over the assignments and one over the GPU processes (both bounded where they
 * are read: at most 100 000 assignments, NVML's process lists).
 */
public final class DeviceHolders {
  /** Why a GPU process stays unattributed. */
  public enum UnattributedReason implements SnakeCaseLabel {
    /** Its cgroup is no Kubernetes pod's (a host process), or it was gone before /proc was read. */
    NOT_IN_A_POD,
    /** Its pod UID is not one the pod metadata knows (not synced yet, or not this node's). */
    POD_UNKNOWN,
    /** Its container id is none of its pod's containers (or its cgroup is the pod's own). */
    CONTAINER_UNKNOWN,
    /** The kubelet answered, and the container holds no claim on this GPU. */
    NO_CLAIM;
  }

  /**
   * One container and one device it holds.
   *
   * @param namespace the pod's namespace
   * @param pod the pod's name
   * @param podUid the pod's UID ("" when the metadata does not know the pod yet)
   * @param container the container's name
   * @param deviceUuid the GPU or MIG UUID ("" for a DRA device that names none)
   * @param deviceIndex NVML's index of the GPU, -1 when NVML does not list the device
   * @param sharing how it holds the device
   * @param migProfile the MIG profile the resource name says, else NVML's for a MIG device, else ""
   * @param memoryBytes NVML's used memory summed over its processes on the device
   * @param smUtilization NVML's per-process SM means summed (0-1); empty exactly when {@code
   *     unknown} is present
   * @param unknown why {@code smUtilization} is empty
   * @param hostPids its GPU processes on the device
   */
  public record HeldDevice(
      String namespace,
      String pod,
      String podUid,
      String container,
      String deviceUuid,
      int deviceIndex,
      Sharing sharing,
      String migProfile,
      long memoryBytes,
      OptionalDouble smUtilization,
      Optional<UnknownReason> unknown,
      List<Integer> hostPids) {
    public HeldDevice {
      Objects.requireNonNull(namespace, "namespace");
      Objects.requireNonNull(pod, "pod");
      Objects.requireNonNull(podUid, "podUid");
      Objects.requireNonNull(container, "container");
      Objects.requireNonNull(deviceUuid, "deviceUuid");
      Objects.requireNonNull(sharing, "sharing");
      Objects.requireNonNull(migProfile, "migProfile");
      Objects.requireNonNull(smUtilization, "smUtilization");
      Objects.requireNonNull(unknown, "unknown");
      hostPids = List.copyOf(hostPids);
      if (smUtilization.isPresent() == unknown.isPresent()) {
        throw new IllegalArgumentException("utilization xor a reason");
      }
    }
  }

  /**
   * The containers without a region that hold a device, and what stays unattributed.
   *
   * @param held per container and device, in the kubelet's order, then by process
   * @param unattributed per GPU UUID, the processes no container holds, by reason
   * @param unattributedBytes per GPU UUID, their NVML memory
   * @param pods the metadata of the pods in {@code held}, by UID (for their pod facts and labels)
   */
  public record Holders(
      List<HeldDevice> held,
      Map<String, Map<UnattributedReason, Integer>> unattributed,
      Map<String, Long> unattributedBytes,
      Map<String, PodMeta> pods) {
    public static final Holders NONE = new Holders(List.of(), Map.of(), Map.of(), Map.of());

    public Holders {
      held = List.copyOf(held);
      unattributed = Map.copyOf(unattributed);
      unattributedBytes = Map.copyOf(unattributedBytes);
      pods = Map.copyOf(pods);
    }

    /** The metadata of a held device's pod; empty while the metadata does not know the pod. */
    public Optional<PodMeta> pod(HeldDevice h) {
      return h.podUid().isEmpty() ? Optional.empty() : Optional.ofNullable(pods.get(h.podUid()));
    }
  }

  private DeviceHolders() {}

  /** A row being summed. */
  private static final class Row {
    final DeviceAssignment at;
    final String podUid;
    long bytes;
    double sm;
    final List<Integer> pids = new ArrayList<>();

    Row(DeviceAssignment at, String podUid) {
      this.at = at;
      this.podUid = podUid;
    }
  }

  /**
   * @param result the latest reconciliation (its GPU processes and NVML snapshot)
   * @param assignments the kubelet's latest answer; empty when pod-resources is off or down
   * @param pods the pods the metadata knows
   * @param regionContainers containers that have a region (reported by their regions instead)
   */
  public static Holders of(
      AttributionResult result,
      Optional<PodResourcesSnapshot> assignments,
      Collection<PodMeta> pods,
      Set<ContainerKey> regionContainers) {
    Map<String, PodMeta> byUid = new HashMap<>();
    Map<String, PodMeta> byName = new HashMap<>();
    for (PodMeta p : pods) {
      byUid.put(p.uid(), p);
      byName.put(p.namespace() + '/' + p.name(), p);
    }
    Map<String, Row> rows = new LinkedHashMap<>();
    Set<String> regionHeld = new HashSet<>();
    for (DeviceAssignment a :
        assignments.map(PodResourcesSnapshot::assignments).orElse(List.of())) {
      PodMeta pod = byName.get(a.namespace() + '/' + a.pod());
      String uid = pod == null ? "" : pod.uid();
      if (!uid.isEmpty() && regionContainers.contains(new ContainerKey(uid, a.container()))) {
        regionHeld.add(key(a.namespace(), a.pod(), a.container(), a.deviceUuid().orElse("")));
        continue;
      }
      rows.putIfAbsent(
          key(a.namespace(), a.pod(), a.container(), a.deviceUuid().orElse("")), new Row(a, uid));
    }
    NvmlSnapshot nvml = result.nvml();
    Map<String, Map<UnattributedReason, Integer>> reasons = new HashMap<>();
    Map<String, Long> unattributedBytes = new HashMap<>();
    for (GpuProcessOwner p : result.gpuProcesses()) {
      if (p.attributed()) {
        continue;
      }
      Optional<GpuSnapshot> gpu = nvml.byUuid(p.gpuUuid());
      long bytes = gpu.flatMap(g -> boxed(g.memoryOf(p.hostPid()))).orElse(0L);
      double sm = gpu.map(g -> g.smUtilizationOf(p.hostPid()).orElse(0)).orElse(0.0);
      UnattributedReason why = null;
      Row row = null;
      ProcessOwner owner = p.owner().orElse(null);
      PodMeta pod = owner == null ? null : byUid.get(owner.podUid());
      String container = pod == null ? null : containerOf(pod, owner);
      if (owner == null) {
        why = UnattributedReason.NOT_IN_A_POD;
      } else if (pod == null) {
        why = UnattributedReason.POD_UNKNOWN;
      } else if (container == null) {
        why = UnattributedReason.CONTAINER_UNKNOWN;
      } else {
        String k = key(pod.namespace(), pod.name(), container, p.gpuUuid());
        if (regionHeld.contains(k)) {
          why = UnattributedReason.NO_CLAIM; // a region container's process its slots lost
        } else if (assignments.isPresent()) {
          row = rows.get(k);
          why = row == null ? UnattributedReason.NO_CLAIM : null;
        } else {
          row =
              rows.computeIfAbsent(
                  k,
                  x ->
                      new Row(
                          new DeviceAssignment(
                              pod.namespace(),
                              pod.name(),
                              container,
                              "",
                              Optional.empty(),
                              gpu.flatMap(GpuSnapshot::mig).isPresent()
                                  ? Sharing.MIG
                                  : Sharing.WHOLE,
                              "",
                              ""),
                          pod.uid()));
        }
      }
      if (row != null) {
        row.bytes += bytes;
        row.sm += sm;
        row.pids.add(p.hostPid());
      } else {
        reasons
            .computeIfAbsent(p.gpuUuid(), u -> new EnumMap<>(UnattributedReason.class))
            .merge(why, 1, Integer::sum);
        unattributedBytes.merge(p.gpuUuid(), bytes, Long::sum);
      }
    }
    List<HeldDevice> held = new ArrayList<>(rows.size());
    Map<String, PodMeta> heldPods = new HashMap<>();
    for (Map.Entry<String, Row> e : rows.entrySet()) {
      Row r = e.getValue();
      String uuid = r.at.deviceUuid().orElse(uuidOf(e.getKey()));
      Optional<GpuSnapshot> gpu = uuid.isEmpty() ? Optional.empty() : nvml.byUuid(uuid);
      Optional<UnknownReason> unknown = Optional.empty();
      if (!nvml.status().up()) {
        unknown = Optional.of(UnknownReason.NVML_UNAVAILABLE);
      } else if (uuid.isEmpty()) {
        unknown = Optional.of(UnknownReason.NO_DEVICE_UUID);
      } else if (gpu.isEmpty()) {
        unknown = Optional.of(UnknownReason.GPU_NOT_IN_NVML);
      } else if (!gpu.get().processUtilizationAvailable()) {
        unknown = Optional.of(UnknownReason.NVML_UNSUPPORTED);
      }
      PodMeta pod = byUid.get(r.podUid);
      if (pod != null) {
        heldPods.put(pod.uid(), pod);
      }
      held.add(
          new HeldDevice(
              r.at.namespace(),
              r.at.pod(),
              r.podUid,
              r.at.container(),
              uuid,
              gpu.map(g -> g.identity().index()).orElse(-1),
              r.at.sharing(),
              r.at.migProfile().isEmpty()
                  ? gpu.flatMap(GpuSnapshot::mig).map(MigInstance::profile).orElse("")
                  : r.at.migProfile(),
              r.bytes,
              unknown.isPresent() ? OptionalDouble.empty() : OptionalDouble.of(Math.min(1, r.sm)),
              unknown,
              r.pids));
    }
    return new Holders(held, reasons, unattributedBytes, heldPods);
  }

  /** The container a process's cgroup names in its pod, or null. */
  private static String containerOf(PodMeta pod, ProcessOwner owner) {
    if (owner.containerId().isEmpty()) {
      return null;
    }
    String id = owner.containerId().get();
    for (ContainerMeta c : pod.containers().values()) {
      if (c.containerId().filter(id::equals).isPresent()) {
        return c.name();
      }
    }
    return null;
  }

  private static Optional<Long> boxed(java.util.OptionalLong v) {
    return v.isPresent() ? Optional.of(v.getAsLong()) : Optional.empty();
  }

  private static String key(String namespace, String pod, String container, String uuid) {
    return namespace + '\u0000' + pod + '\u0000' + container + '\u0000' + uuid;
  }

  private static String uuidOf(String key) {
    return key.substring(key.lastIndexOf('\u0000') + 1);
  }
}
