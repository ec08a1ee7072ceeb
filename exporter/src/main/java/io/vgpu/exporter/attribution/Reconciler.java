package io.vgpu.exporter.attribution;

import io.vgpu.exporter.discovery.ContainerKey;
import io.vgpu.exporter.nvml.GpuSnapshot;
import io.vgpu.exporter.nvml.NvmlSnapshot;
import io.vgpu.hostpid.HostPidResolver;
import io.vgpu.hostpid.PidResolution;
import io.vgpu.hostpid.ProcFsUnavailableException;
import io.vgpu.hostpid.ProcessOwner;
import io.vgpu.hostpid.Resolved;
import io.vgpu.hostpid.Unresolved;
import io.vgpu.regioncodec.DeviceHeader;
import io.vgpu.regioncodec.DeviceUsage;
import io.vgpu.regioncodec.ProcessSlot;
import io.vgpu.regioncodec.SlotExtension;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalInt;
import java.util.OptionalLong;
import java.util.Set;
import java.util.TreeSet;

/**
 * Joins regions, /proc and NVML into per-container attribution. A function of its inputs: the
 * region snapshots, the NVML snapshot, what the resolver answers, the previous {@link History} and
 * the time. It reads /proc only through the resolver and writes nothing.
 *
 * <p>How a slot is judged:
 *
 * <ol>
 *   <li>Its in-container pid is resolved inside its own pod (the resolver never crosses pods, so a
 *       tenant cannot claim another pod's process by writing its pid anywhere).
 *   <li>When that is ambiguous or finds nothing, the GPU processes NVML lists are asked: a GPU
 *       process of this pod (and container, when known) whose innermost pid is the slot's pid
 *       settles it (the pause container, the usual pid-1 twin, never holds a GPU context). Then the
 *       recorded hostpid is accepted only if /proc confirms it is that pid in this pod.
 *   <li>A slot whose process is gone, or that the resolver could not place for longer than the
 *       grace period, or whose start time (libvgpu's extension) or dead recorded hostpid shows the
 *       pid was reused, is a zombie: counted with its bytes, never attributed.
 *   <li>A resolved slot whose recorded hostpid differs from the real one is counted by reason.
 * </ol>
 *
 * <p>A container's utilization on a device is the sum, over its host pids (slots and unslotted GPU
 * processes of the container), of NVML's windowed per-process means; a process NVML lists without
 * samples counts 0. It is unknown, with a reason, when NVML is unavailable, does not know the GPU
 * or its per-process utilization, or when one of the container's live slots is unresolved.
 *
 * <p>Stateless and thread safe (the resolver it is given is thread safe); all memory between runs
 * travels in {@link History}.
 */
public final class Reconciler {
  /**
   * Reconciliation settings.
   *
   * @param zombieGrace how long a slot may go unresolved before it counts as a zombie
   * @param leakAfter memory held this long without a kernel is a suspected leak
   * @param maxGap longest interval credited to time totals between two reconciliations
   */
  public record Settings(Duration zombieGrace, Duration leakAfter, Duration maxGap) {
    public Settings {
      Objects.requireNonNull(zombieGrace, "zombieGrace");
      Objects.requireNonNull(leakAfter, "leakAfter");
      Objects.requireNonNull(maxGap, "maxGap");
      if (zombieGrace.isNegative() || leakAfter.isNegative() || maxGap.isNegative()) {
        throw new IllegalArgumentException("durations must not be negative");
      }
    }

    public static Settings defaults() {
      return new Settings(Duration.ofSeconds(30), Duration.ofHours(1), Duration.ofSeconds(60));
    }
  }

  private final Settings settings;

  public Reconciler(Settings settings) {
    this.settings = Objects.requireNonNull(settings, "settings");
  }

  /** A GPU process and who owns it. */
  private record GpuProcess(int hostPid, Optional<ProcessOwner> owner) {}

  /** Reconciles every container against one NVML snapshot. */
  public AttributionResult reconcile(
      List<ContainerInput> containers,
      NvmlSnapshot nvml,
      HostPidResolver pids,
      History history,
      Instant now) {
    Lookups lookups = new Lookups(pids);
    // Every host pid NVML mentions (listed or sampled), with its owner.
    Map<String, List<GpuProcess>> gpuProcesses = new LinkedHashMap<>();
    for (GpuSnapshot gpu : nvml.gpus()) {
      Set<Integer> pidsOnGpu = new TreeSet<>();
      gpu.processes().orElse(List.of()).forEach(p -> pidsOnGpu.add(p.pid()));
      gpu.smUtilizationByPid().ifPresent(m -> pidsOnGpu.addAll(m.keySet()));
      List<GpuProcess> list = new ArrayList<>();
      for (int pid : pidsOnGpu) {
        list.add(new GpuProcess(pid, lookups.owner(pid)));
      }
      gpuProcesses.put(gpu.identity().uuid(), list);
    }
    Map<String, Long> containersPerPod = new HashMap<>();
    containers.forEach(c -> containersPerPod.merge(c.key().podUid(), 1L, Long::sum));

    Map<History.SlotRef, Instant> unresolvedSince = new HashMap<>();
    Map<ContainerKey, History.Container> nextContainers = new HashMap<>();
    List<ContainerAttribution> out = new ArrayList<>();
    Set<Integer> attributed = new HashSet<>();
    Map<String, Integer> containersPerGpu = new HashMap<>();

    List<ContainerInput> sorted = new ArrayList<>(containers);
    sorted.sort(Comparator.comparing(ContainerInput::key));
    for (ContainerInput c : sorted) {
      ContainerAttribution a =
          container(
              c,
              nvml,
              gpuProcesses,
              lookups,
              history,
              now,
              unresolvedSince,
              containersPerPod.get(c.key().podUid()) == 1,
              nextContainers);
      out.add(a);
      attributed.addAll(a.hostPids());
      a.devices().stream()
          .map(DeviceAttribution::uuid)
          .filter(u -> !u.isEmpty())
          .distinct()
          .forEach(u -> containersPerGpu.merge(u, 1, Integer::sum));
    }

    List<GpuAttribution> gpus = new ArrayList<>();
    List<GpuProcessOwner> owners = new ArrayList<>();
    for (GpuSnapshot gpu : nvml.gpus()) {
      String uuid = gpu.identity().uuid();
      List<GpuProcess> procs = gpuProcesses.get(uuid);
      int unattributed = 0;
      long unattributedBytes = 0;
      for (GpuProcess p : procs) {
        owners.add(
            new GpuProcessOwner(uuid, p.hostPid(), p.owner(), attributed.contains(p.hostPid())));
        if (!attributed.contains(p.hostPid())) {
          unattributed++;
          unattributedBytes += gpu.memoryOf(p.hostPid()).orElse(0);
        }
      }
      gpus.add(
          new GpuAttribution(
              uuid,
              containersPerGpu.getOrDefault(uuid, 0),
              procs.size(),
              unattributed,
              unattributedBytes));
    }
    History next = new History(Optional.of(now), unresolvedSince, nextContainers);
    return new AttributionResult(now, nvml, out, gpus, next, owners);
  }

  private ContainerAttribution container(
      ContainerInput c,
      NvmlSnapshot nvml,
      Map<String, List<GpuProcess>> gpuProcesses,
      Lookups lookups,
      History history,
      Instant now,
      Map<History.SlotRef, Instant> unresolvedSince,
      boolean onlyContainerOfPod,
      Map<ContainerKey, History.Container> nextContainers) {
    String podUid = c.key().podUid();
    // GPU processes of this container by cgroup (pod, and container id when both sides know it).
    Map<Integer, ProcessOwner> ownGpu = new LinkedHashMap<>();
    for (List<GpuProcess> procs : gpuProcesses.values()) {
      for (GpuProcess p : procs) {
        p.owner()
            .filter(o -> o.podUid().equals(podUid))
            .filter(o -> sameContainer(o, c.containerId(), onlyContainerOfPod))
            .ifPresent(o -> ownGpu.put(p.hostPid(), o));
      }
    }

    Set<Integer> slotPids = new LinkedHashSet<>();
    c.regions().forEach(r -> r.snapshot().processes().forEach(s -> slotPids.add(s.pid())));
    Map<Integer, PidResolution> resolutions;
    try {
      resolutions = lookups.pids().resolve(podUid, c.containerId(), slotPids);
    } catch (ProcFsUnavailableException e) {
      resolutions = Map.of(); // every slot unresolved: utilization unknown, nobody a zombie
    }

    List<SlotVerdict> verdicts = new ArrayList<>();
    for (ContainerInput.Region r : c.regions()) {
      for (ProcessSlot s : r.snapshot().processes()) {
        SlotVerdict v =
            judge(
                c, r, s, resolutions.get(s.pid()), ownGpu, lookups, history, now, unresolvedSince);
        verdicts.add(v);
      }
    }

    Set<Integer> hostPids = new LinkedHashSet<>();
    verdicts.forEach(v -> v.hostPid().ifPresent(hostPids::add));
    int unslotted = 0;
    for (int gpuPid : ownGpu.keySet()) {
      if (hostPids.add(gpuPid)) {
        unslotted++;
      }
    }
    boolean anyUnresolved = verdicts.stream().anyMatch(SlotVerdict::unresolved);

    List<DeviceAttribution> devices = devices(c, verdicts, hostPids, anyUnresolved, nvml);

    // Region header fields (several files: the most conservative view).
    int utilizationSwitch = 0;
    int recentKernel = Integer.MAX_VALUE;
    int priority = Integer.MAX_VALUE;
    long lastKernel = 0;
    for (ContainerInput.Region r : c.regions()) {
      utilizationSwitch = Math.max(utilizationSwitch, r.snapshot().utilizationSwitch());
      recentKernel = Math.min(recentKernel, r.snapshot().recentKernel());
      priority = Math.min(priority, r.snapshot().priority());
      lastKernel = Math.max(lastKernel, r.snapshot().lastKernelTimeEpochSeconds());
    }
    if (c.regions().isEmpty()) {
      recentKernel = 0;
      priority = 0;
    }

    // Time-based signals.
    History.Container before = history.containers().get(c.key());
    double dt = history.at().map(at -> seconds(Duration.between(at, now))).orElse(0.0);
    dt = Math.clamp(dt, 0, seconds(settings.maxGap()));
    boolean busy = devices.stream().anyMatch(d -> d.smUtilization().orElse(0) > 0);
    long lastActive = Math.max(before == null ? 0 : before.lastActiveEpochSeconds(), lastKernel);
    if (busy) {
      lastActive = Math.max(lastActive, now.getEpochSecond());
    }
    Instant firstSeen = before == null ? now : before.firstSeen();
    long heldBytes = devices.stream().mapToLong(DeviceAttribution::usedBytes).sum();
    Optional<Double> idle;
    if (heldBytes == 0) {
      idle = Optional.of(0.0);
    } else if (lastActive > 0) {
      idle = Optional.of(Math.max(0.0, now.getEpochSecond() - (double) lastActive));
    } else {
      idle = Optional.of(seconds(Duration.between(firstSeen, now)));
    }
    boolean leak = idle.get() >= seconds(settings.leakAfter()) && heldBytes > 0;
    double blocked =
        (before == null ? 0 : before.priorityBlockedSeconds()) + (recentKernel < 0 ? dt : 0);
    Map<Integer, Double> overLimit =
        new HashMap<>(before == null ? Map.of() : before.overSmLimitSeconds());
    for (DeviceAttribution d : devices) {
      overLimit.merge(d.index(), d.overSmLimit() ? dt : 0.0, Double::sum);
    }
    nextContainers.put(c.key(), new History.Container(firstSeen, lastActive, blocked, overLimit));

    return new ContainerAttribution(
        c.key(),
        devices,
        verdicts,
        List.copyOf(hostPids),
        unslotted,
        utilizationSwitch,
        recentKernel,
        priority,
        idle,
        leak,
        blocked,
        overLimit);
  }

  private static boolean sameContainer(
      ProcessOwner owner, Optional<String> containerId, boolean onlyContainerOfPod) {
    if (containerId.isPresent() && owner.containerId().isPresent()) {
      return containerId.get().equalsIgnoreCase(owner.containerId().get());
    }
    // Without ids on both sides only a pod with a single known container can claim it.
    return onlyContainerOfPod;
  }

  private SlotVerdict judge(
      ContainerInput c,
      ContainerInput.Region r,
      ProcessSlot s,
      PidResolution resolution,
      Map<Integer, ProcessOwner> ownGpu,
      Lookups lookups,
      History history,
      Instant now,
      Map<History.SlotRef, Instant> unresolvedSince) {
    long bytes = s.totalBytes();
    int recorded = s.hostPid();
    String podUid = c.key().podUid();
    OptionalInt host = OptionalInt.empty();
    OptionalLong start = OptionalLong.empty();
    boolean gone = false;
    if (resolution instanceof Resolved(int hostPid, long startTicks)) {
      host = OptionalInt.of(hostPid);
      start = OptionalLong.of(startTicks);
    } else if (resolution instanceof Unresolved(Unresolved.Reason reason)) {
      gone = reason == Unresolved.Reason.PROCESS_GONE;
      if (!gone) {
        host = fallback(s, c, ownGpu, lookups);
      }
    }

    if (host.isPresent()) {
      int h = host.getAsInt();
      // pid reuse: libvgpu recorded the start time of the process that owns the slot
      OptionalLong slotStart =
          s.extension()
              .map(SlotExtension::startTimeTicks)
              .filter(t -> t != 0)
              .map(OptionalLong::of)
              .orElse(OptionalLong.empty());
      if (slotStart.isPresent()
          && start.isPresent()
          && slotStart.getAsLong() != start.getAsLong()) {
        return zombie(r, s, ZombieReason.PID_REUSED, bytes);
      }
      // HAMi-core slot whose (real) recorded host pid died while the pid lives on in a new process
      if (slotStart.isEmpty()
          && recorded != 0
          && recorded != s.pid()
          && recorded != h
          && !lookups.exists(recorded)) {
        return zombie(r, s, ZombieReason.PID_REUSED, bytes);
      }
      Optional<MismatchReason> mismatch = mismatch(recorded, s.pid(), h, podUid, lookups);
      return new SlotVerdict(
          r.path(), s.slotIndex(), s.pid(), recorded, host, mismatch, Optional.empty(), bytes);
    }

    History.SlotRef ref = new History.SlotRef(r.path(), s.pid());
    if (!gone
        && resolution instanceof Unresolved(Unresolved.Reason reason)
        && reason == Unresolved.Reason.NOT_IN_POD) {
      Instant since = history.unresolvedSince().getOrDefault(ref, now);
      if (Duration.between(since, now).compareTo(settings.zombieGrace()) >= 0) {
        gone = true;
      } else {
        unresolvedSince.put(ref, since);
      }
    }
    if (gone) {
      return zombie(r, s, ZombieReason.PROCESS_GONE, bytes);
    }
    return new SlotVerdict(
        r.path(),
        s.slotIndex(),
        s.pid(),
        recorded,
        OptionalInt.empty(),
        Optional.empty(),
        Optional.empty(),
        bytes);
  }

  /**
   * When /proc alone cannot place a slot: ask NVML's GPU processes, then check the recorded pid.
   */
  private static OptionalInt fallback(
      ProcessSlot s, ContainerInput c, Map<Integer, ProcessOwner> ownGpu, Lookups lookups) {
    List<Integer> candidates =
        ownGpu.values().stream()
            .filter(o -> o.innermostPid() == s.pid())
            .map(ProcessOwner::hostPid)
            .toList();
    if (candidates.size() == 1) {
      return OptionalInt.of(candidates.getFirst());
    }
    if (s.hostPid() > 0) {
      Optional<ProcessOwner> owner = lookups.owner(s.hostPid());
      if (owner.isPresent()
          && owner.get().podUid().equals(c.key().podUid())
          && owner.get().innermostPid() == s.pid()
          && (c.containerId().isEmpty()
              || owner.get().containerId().isEmpty()
              || owner.get().containerId().get().equalsIgnoreCase(c.containerId().get()))) {
        return OptionalInt.of(s.hostPid());
      }
    }
    return OptionalInt.empty();
  }

  private static Optional<MismatchReason> mismatch(
      int recorded, int pid, int real, String podUid, Lookups lookups) {
    if (recorded == real) {
      return Optional.empty();
    }
    if (recorded == 0) {
      return Optional.of(MismatchReason.ZERO);
    }
    if (recorded == pid) {
      return Optional.of(MismatchReason.CONTAINER_PID);
    }
    Optional<ProcessOwner> owner = lookups.owner(recorded);
    if (owner.isPresent() && !owner.get().podUid().equals(podUid)) {
      return Optional.of(MismatchReason.OTHER_POD);
    }
    if (!lookups.exists(recorded)) {
      return Optional.of(MismatchReason.DEAD);
    }
    return Optional.of(MismatchReason.OTHER);
  }

  private static SlotVerdict zombie(
      ContainerInput.Region r, ProcessSlot s, ZombieReason reason, long bytes) {
    return new SlotVerdict(
        r.path(),
        s.slotIndex(),
        s.pid(),
        s.hostPid(),
        OptionalInt.empty(),
        Optional.empty(),
        Optional.of(reason),
        bytes);
  }

  private List<DeviceAttribution> devices(
      ContainerInput c,
      List<SlotVerdict> verdicts,
      Set<Integer> hostPids,
      boolean anyUnresolved,
      NvmlSnapshot nvml) {
    // (index, uuid) in first-seen order over the container's files.
    Map<String, DeviceAcc> accs = new LinkedHashMap<>();
    Map<History.SlotRef, SlotVerdict> byRef = new HashMap<>();
    verdicts.forEach(v -> byRef.put(new History.SlotRef(v.region(), v.pid()), v));
    for (ContainerInput.Region r : c.regions()) {
      List<DeviceAcc> byIndex = new ArrayList<>();
      for (DeviceHeader h : r.snapshot().devices()) {
        DeviceAcc a = accs.computeIfAbsent(h.index() + "/" + h.uuid(), k -> new DeviceAcc(h));
        a.smLimit = Math.max(a.smLimit, h.smLimitPercent());
        byIndex.add(a);
      }
      for (ProcessSlot s : r.snapshot().processes()) {
        SlotVerdict v = byRef.get(new History.SlotRef(r.path(), s.pid()));
        for (DeviceUsage u : s.devices()) {
          DeviceAcc a = byIndex.get(u.deviceIndex());
          if (v != null && v.isZombie()) {
            a.zombieBytes = saturated(a.zombieBytes, u.totalBytes());
          } else {
            a.usedBytes = saturated(a.usedBytes, u.totalBytes());
            a.regionSm += u.smUtilPercent() / 100.0;
            a.monitorUsed = saturated(a.monitorUsed, u.monitorUsedBytes());
          }
        }
      }
    }
    List<DeviceAttribution> out = new ArrayList<>();
    for (DeviceAcc a : accs.values()) {
      Optional<UnknownReason> unknown = Optional.empty();
      Optional<GpuSnapshot> gpu = nvml.byUuid(a.uuid);
      if (!nvml.status().up()) {
        unknown = Optional.of(UnknownReason.NVML_UNAVAILABLE);
      } else if (a.uuid.isEmpty()) {
        unknown = Optional.of(UnknownReason.NO_DEVICE_UUID);
      } else if (gpu.isEmpty()) {
        unknown = Optional.of(UnknownReason.GPU_NOT_IN_NVML);
      } else if (!gpu.get().processUtilizationAvailable()) {
        unknown = Optional.of(UnknownReason.NVML_UNSUPPORTED);
      } else if (anyUnresolved) {
        unknown = Optional.of(UnknownReason.PID_UNRESOLVED);
      }
      OptionalDouble util = OptionalDouble.empty();
      OptionalLong memory = OptionalLong.empty();
      if (unknown.isEmpty()) {
        Map<Integer, Double> perPid = gpu.get().smUtilizationByPid().orElseThrow();
        double sum = 0;
        long bytes = 0;
        for (int h : hostPids) {
          sum += perPid.getOrDefault(h, 0.0);
          bytes = saturated(bytes, gpu.get().memoryOf(h).orElse(0));
        }
        util = OptionalDouble.of(Math.clamp(sum, 0.0, 1.0));
        memory = OptionalLong.of(bytes);
      } else if (gpu.isPresent() && gpu.get().processes().isPresent() && !anyUnresolved) {
        long bytes = 0;
        for (int h : hostPids) {
          bytes = saturated(bytes, gpu.get().memoryOf(h).orElse(0));
        }
        memory = OptionalLong.of(bytes);
      }
      out.add(
          new DeviceAttribution(
              a.index,
              a.uuid,
              util,
              unknown,
              a.regionSm,
              a.monitorUsed,
              memory,
              a.usedBytes,
              a.zombieBytes,
              a.smLimit));
    }
    return out;
  }

  private static final class DeviceAcc {
    final int index;
    final String uuid;
    int smLimit;
    long usedBytes;
    long zombieBytes;
    long monitorUsed;
    double regionSm;

    DeviceAcc(DeviceHeader h) {
      this.index = h.index();
      this.uuid = h.uuid();
    }
  }

  private static long saturated(long a, long b) {
    long r = a + b;
    return r < 0 ? Long.MAX_VALUE : r;
  }

  private static double seconds(Duration d) {
    return d.toNanos() / 1e9;
  }

  /** Per-call memo of resolver answers about host pids. */
  private static final class Lookups {
    private final HostPidResolver pids;
    private final Map<Integer, Optional<ProcessOwner>> owners = new HashMap<>();
    private final Map<Integer, Boolean> exists = new HashMap<>();

    Lookups(HostPidResolver pids) {
      this.pids = pids;
    }

    HostPidResolver pids() {
      return pids;
    }

    Optional<ProcessOwner> owner(int hostPid) {
      return owners.computeIfAbsent(
          hostPid,
          p -> {
            try {
              return pids.ownerOf(p);
            } catch (ProcFsUnavailableException e) {
              return Optional.empty();
            }
          });
    }

    boolean exists(int hostPid) {
      return exists.computeIfAbsent(
          hostPid, p -> hostPid > 0 && pids.procFs().startTimeTicks(p).isPresent());
    }
  }
}
