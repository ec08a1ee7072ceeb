package io.vgpu.exporter.demo;

import io.vgpu.regioncodec.DeviceUsage;
import io.vgpu.regioncodec.ExtensionDevice;
import io.vgpu.regioncodec.RegionFile;
import io.vgpu.regioncodec.RegionSpec;
import io.vgpu.regioncodec.RegionWriter;
import io.vgpu.regioncodec.SlotExtension;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * One simulated container of the demo node: its region file, its real child processes, and the one
 * usage model both its region and the fake NVML script are written from, so the two agree the way a
 * healthy node's do (no memory gap, utilization within the SM limit, the limiter throttling only a
 * container that runs at its limit, no OOM rejections but where the container sits at its limit).
 * Values move with the node's clock, not with the number of ticks, so a fast clock shows what hours
 * of running look like.
 */
final class DemoContainer {
  static final long MIB = 1L << 20;
  private static final long CONTEXT_BYTES = 300 * MIB;
  private static final long MODULE_BYTES = 20 * MIB;

  /** How the container behaves. */
  enum Behavior {
    /** Memory and utilization move well inside the limits. */
    HEALTHY,
    /** Runs at its SM limit: the limiter throttles it (and only it). */
    BUSY,
    /** Holds memory, launches no kernels (an idle notebook). */
    IDLE,
    /** The pod Succeeded: its directory is still there, no processes. */
    FINISHED,
    /** The pod was deleted, its directory left behind. */
    STALE
  }

  /** A real child process and its pid as its namespace sees it. */
  record Child(Process process, int hostPid, int nsPid) {}

  /** A slot left behind by a process that is gone. */
  record ZombieSlot(int slot, int pid, int hostPid, long bytes) {}

  final String podUid;
  final String namespace;
  final String pod;
  final String container;
  final Path file;
  final List<Integer> devices;
  final long limitBytes;
  final int smLimit;
  final List<Child> children;
  final double phase;
  final Behavior behavior;
  final Optional<DemoProblem> problem;
  final Optional<ZombieSlot> zombie;

  /** HAMi-core's library wrote the region (no libvgpu extension, no counters). */
  final boolean hamiCore;

  private long oomRejections;
  private double throttledNanos;
  private double launchesDelayed;
  private double launchesTotal;
  private double limiterBusyNanos;
  private double lastCounterSeconds = Double.NaN;

  DemoContainer(
      String podUid,
      String namespace,
      String pod,
      String container,
      Path file,
      List<Integer> devices,
      long limitBytes,
      int smLimit,
      List<Child> children,
      double phase,
      Behavior behavior,
      Optional<DemoProblem> problem,
      Optional<ZombieSlot> zombie,
      boolean hamiCore) {
    this.podUid = podUid;
    this.namespace = namespace;
    this.pod = pod;
    this.container = container;
    this.file = file;
    this.devices = List.copyOf(devices);
    this.limitBytes = limitBytes;
    this.smLimit = smLimit;
    this.children = List.copyOf(children);
    this.phase = phase;
    this.behavior = behavior;
    this.problem = problem;
    this.zombie = zombie;
    this.hamiCore = hamiCore;
  }

  boolean running() {
    return behavior != Behavior.FINISHED && behavior != Behavior.STALE;
  }

  boolean is(DemoProblem p) {
    return problem.isPresent() && problem.get() == p;
  }

  /** Share of the limit the container's memory holds at {@code t} seconds. */
  private double memoryFraction(double t) {
    if (is(DemoProblem.AT_MEMORY_LIMIT)) {
      return 0.985;
    }
    if (behavior == Behavior.IDLE) {
      return 0.5;
    }
    return 0.35 + 0.25 * (0.5 + 0.5 * Math.sin(phase + t / 60));
  }

  /** Region usage of one live slot on the container's {@code d}-th device. */
  DeviceUsage usage(int slot, int d, double t) {
    long target = (long) (limitBytes * memoryFraction(t) / children.size());
    long data = Math.max(0, target - CONTEXT_BYTES - MODULE_BYTES) / MIB * MIB;
    long total = CONTEXT_BYTES + MODULE_BYTES + data;
    return new DeviceUsage(d, CONTEXT_BYTES, MODULE_BYTES, data, total, total, regionUtil(slot, t));
  }

  /** SM percent of the whole GPU the container's processes use at {@code t}. */
  int containerUtil(double t) {
    if (!running() || behavior == Behavior.IDLE) {
      return 0;
    }
    int scale = smLimit <= 0 || smLimit >= 100 ? 100 : smLimit;
    double f =
        behavior == Behavior.BUSY
            ? 0.92 + 0.06 * Math.sin(phase + t / 11)
            : 0.3 + 0.25 * Math.sin(phase + t / 13);
    return (int) Math.round(scale * f);
  }

  /** What one live slot really uses (NVML's per-process sample). */
  int slotUtil(int slot, double t) {
    int u = containerUtil(t);
    int n = children.size();
    return u / n + (slot < u % n ? 1 : 0);
  }

  /** What the library writes into the slot: 0 when it cannot find its host pid (the HAMi bug). */
  private int regionUtil(int slot, double t) {
    return is(DemoProblem.HOSTPID_WRONG) ? 0 : slotUtil(slot, t);
  }

  /** The host pid the library records: the container pid when it cannot see the host. */
  private int recordedHostPid(Child c, boolean namespaces) {
    if (is(DemoProblem.HOSTPID_WRONG)) {
      return namespaces ? c.nsPid() : 0;
    }
    return c.hostPid();
  }

  /** The region's slots as the library first registers them (the zombie's one included). */
  void initialSlots(RegionSpec.Builder spec, long nowMillis, boolean namespaces) {
    for (int s = 0; s < children.size(); s++) {
      spec.slot(slotSpec(s, children.get(s), 0, nowMillis, namespaces));
    }
    if (zombie.isPresent()) {
      ZombieSlot z = zombie.get();
      List<DeviceUsage> usage = new ArrayList<>();
      for (int d = 0; d < devices.size(); d++) {
        long bytes = d == 0 ? z.bytes() : 0;
        usage.add(
            new DeviceUsage(
                d,
                d == 0 ? CONTEXT_BYTES : 0,
                0,
                bytes - (d == 0 ? CONTEXT_BYTES : 0),
                bytes,
                bytes,
                0));
      }
      RegionSpec.SlotSpec spec0 = RegionSpec.SlotSpec.of(z.pid(), z.hostPid(), 1, usage);
      // Its last heartbeat is when it died: long ago by the time anyone looks.
      spec.slot(
          hamiCore
              ? spec0
              : spec0.withExtension(
                  new SlotExtension(0, nowMillis * 1_000_000L, SlotExtension.HOSTPID_UNKNOWN)));
    }
  }

  private RegionSpec.SlotSpec slotSpec(
      int s, Child c, double t, long nowMillis, boolean namespaces) {
    List<DeviceUsage> usage = new ArrayList<>();
    for (int d = 0; d < devices.size(); d++) {
      usage.add(usage(s, d, t));
    }
    RegionSpec.SlotSpec spec =
        RegionSpec.SlotSpec.of(c.nsPid(), recordedHostPid(c, namespaces), 1, usage);
    return hamiCore
        ? spec
        : spec.withExtension(
            new SlotExtension(0, nowMillis * 1_000_000L, SlotExtension.HOSTPID_UNKNOWN));
  }

  /**
   * Writes this moment into the region: every live slot's usage (the slot table itself is left
   * alone, so a slot {@code cleanup} freed stays free), the last kernel time and, for libvgpu
   * regions, the counters.
   *
   * @param t seconds since the node started
   */
  void write(double t, long nowMillis, long startEpochSeconds, boolean namespaces)
      throws IOException {
    advanceCounters(t);
    if (!running()) {
      return;
    }
    try (RegionFile rf = RegionFile.openReadWrite(file)) {
      RegionWriter w = rf.writer();
      for (int s = 0; s < children.size(); s++) {
        w.putSlot(s, slotSpec(s, children.get(s), t, nowMillis, namespaces));
      }
      long lastKernel = behavior == Behavior.IDLE ? startEpochSeconds - 7200 : nowMillis / 1000;
      w.setLastKernelTime(lastKernel);
      if (hamiCore) {
        return;
      }
      for (int d = 0; d < devices.size(); d++) {
        // The demo's library never rejects bytes or reports a window share: those stay zero.
        w.setExtensionDevice(
            new ExtensionDevice(
                d,
                oomRejections,
                0,
                (long) throttledNanos,
                (long) launchesDelayed,
                (long) launchesTotal,
                (long) limiterBusyNanos,
                0));
      }
    }
  }

  /** Counters grow with the clock: launches while busy, throttling only at the SM limit. */
  private void advanceCounters(double t) {
    double dt = Double.isNaN(lastCounterSeconds) ? 0 : Math.max(0, t - lastCounterSeconds);
    lastCounterSeconds = t;
    if (!running() || behavior == Behavior.IDLE) {
      return;
    }
    int n = children.size();
    launchesTotal += 40 * dt * n;
    // the limiter's charged kernel time: about what the container runs, a share of its SM limit
    limiterBusyNanos += 0.8 * smLimit / 100.0 * dt * 1e9;
    if (behavior == Behavior.BUSY) {
      throttledNanos += 0.15e9 * dt * n;
      launchesDelayed += 3 * dt * n;
    }
    if (is(DemoProblem.AT_MEMORY_LIMIT)) {
      // One refused allocation a minute: the serving loop retries a batch that does not fit.
      oomRejections = (long) Math.floor(t / 60) + 1;
    }
  }

  /**
   * Appends this container's processes to the fake NVML script: every live process on every GPU the
   * container uses, with exactly the memory its slot accounts there, and samples of what it really
   * runs at each of {@code stamps} (none while idle). A gone process is not on the GPU. {@code
   * util} gets the current utilization per GPU.
   *
   * @param t seconds since the node started, now
   * @param stamps sample times (epoch microseconds), oldest first, the last one now
   * @param startMillis when the node started (epoch milliseconds)
   */
  void appendNvml(
      StringBuilder procs, long[] used, int[] util, double t, List<Long> stamps, long startMillis) {
    if (!running()) {
      return;
    }
    for (int s = 0; s < children.size(); s++) {
      Child c = children.get(s);
      for (int d = 0; d < devices.size(); d++) {
        int gpu = devices.get(d);
        long bytes = usage(s, d, t).totalBytes();
        used[gpu] += bytes;
        procs.append("process %d pid=%d used=%d%n".formatted(gpu, c.hostPid(), bytes));
        if (behavior == Behavior.IDLE) {
          continue;
        }
        util[gpu] += slotUtil(s, t);
        for (long ts : stamps) {
          int sm = slotUtil(s, (ts / 1000 - startMillis) / 1000.0);
          procs.append("sample %d pid=%d sm=%d mem=5 ts=%d%n".formatted(gpu, c.hostPid(), sm, ts));
        }
      }
    }
  }
}
