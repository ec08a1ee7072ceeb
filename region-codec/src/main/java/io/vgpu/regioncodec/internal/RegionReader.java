package io.vgpu.regioncodec.internal;

import io.vgpu.regioncodec.DeviceHeader;
import io.vgpu.regioncodec.DeviceUsage;
import io.vgpu.regioncodec.ExtensionDevice;
import io.vgpu.regioncodec.ProcessSlot;
import io.vgpu.regioncodec.RegionException;
import io.vgpu.regioncodec.RegionExtension;
import io.vgpu.regioncodec.RegionFile;
import io.vgpu.regioncodec.RegionFormatException;
import io.vgpu.regioncodec.RegionSnapshot;
import io.vgpu.regioncodec.SlotExtension;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.locks.LockSupport;

/**
 * Builds a {@link RegionSnapshot} from a region segment by the reader protocol of
 * hami-core-facts.md 2.5: {@code proc_num} read with acquire, clamped to [0, 1024] and re-checked
 * after the pass (one redo on change); per-slot seqlock with bounded back-off; live slots only;
 * first occurrence of each pid. Work is proportional to the live slots times the devices in use.
 *
 * <p>Thread-safe: all state is local to one call. The segment may change concurrently (that is the
 * point); it must not shrink, which the caller guards against.
 */
public final class RegionReader {
  private RegionReader() {}

  /** Attempts per slot before a torn read is accepted as best effort (the facts' ~100). */
  public static final int MAX_TRIES_PER_SLOT = 100;

  /** Retries per snapshot across all slots; once spent, torn slots are read once. */
  public static final int MAX_RETRIES_PER_SNAPSHOT = 300;

  /** Retries that only spin; a writer's critical section is two atomic adds long. */
  public static final int SPIN_TRIES = 32;

  /**
   * Total time one snapshot may spend parked waiting for writers. A seqlock that stays odd this
   * long belongs to a writer that died mid-update or to a hostile tenant; either way the scrape
   * must not stall, so the slot is reported as best effort.
   */
  public static final long PARK_BUDGET_NANOS = 1_000_000L;

  private static final int USAGE_FIELDS = 7;

  /** One shared all-zero usage per device index: a device a slot never used costs nothing. */
  private static final DeviceUsage[] ZERO_USAGE = new DeviceUsage[Geometry.MAX_DEVICES];

  static {
    for (int d = 0; d < ZERO_USAGE.length; d++) {
      ZERO_USAGE[d] = new DeviceUsage(d, 0, 0, 0, 0, 0, 0);
    }
  }

  /**
   * Reads a snapshot.
   *
   * @param extensionMapped whether the segment is long enough to hold the extension block
   */
  public static RegionSnapshot snapshot(
      MemorySegment segment, Geometry g, boolean extensionMapped) {
    int major = g.majorOffset >= 0 ? Access.intAcquire(segment, g.majorOffset) : 0;
    int minor = g.minorOffset >= 0 ? Access.intAcquire(segment, g.minorOffset) : 0;
    long ownerPid = Access.u64Saturated(segment, g.ownerPidOffset);
    long rawDeviceNum = Access.longAcquire(segment, g.deviceNumOffset);
    int deviceCount =
        rawDeviceNum < 0 || rawDeviceNum > Geometry.MAX_DEVICES
            ? Geometry.MAX_DEVICES
            : (int) rawDeviceNum;

    DeviceHeader[] devices = new DeviceHeader[deviceCount];
    for (int d = 0; d < deviceCount; d++) {
      devices[d] =
          new DeviceHeader(
              d,
              Text.cString(segment, g.uuid(d), Geometry.UUID_LEN),
              Access.u64Saturated(segment, g.limit(d)),
              Access.u64SaturatedInt(segment, g.smLimit(d)));
    }
    int utilizationSwitch = Access.intAcquire(segment, g.utilizationSwitchOffset);
    int recentKernel = Access.intAcquire(segment, g.recentKernelOffset);
    int priority = Access.intAcquire(segment, g.priorityOffset);
    long lastKernelTime =
        g.lastKernelTimeOffset >= 0 ? Access.u64Saturated(segment, g.lastKernelTimeOffset) : 0;

    boolean hasExtension = extensionMapped && extensionValid(segment);
    Pass pass = new Pass(segment, g, deviceCount, hasExtension);

    long generation = hasExtension ? generation(segment) : 0;
    int rawProcNum = Access.intAcquire(segment, g.procNumOffset);
    pass.run(clamp(rawProcNum));
    int rawAfter = Access.intAcquire(segment, g.procNumOffset);
    long generationAfter = hasExtension ? generation(segment) : 0;
    if (rawAfter != rawProcNum || generationAfter != generation || (generation & 1) != 0) {
      // The slot table was compacted (or grew) during the pass: slots may have moved. Redo once;
      // if it moves again, report what we have as best effort.
      rawProcNum = rawAfter;
      generation = generationAfter;
      pass.run(clamp(rawProcNum));
      rawAfter = Access.intAcquire(segment, g.procNumOffset);
      generationAfter = hasExtension ? generation(segment) : 0;
      if (rawAfter != rawProcNum || generationAfter != generation || (generation & 1) != 0) {
        pass.bestEffort = true;
      }
    }

    if (pass.overfull) {
      throw new RegionFormatException(
          RegionException.Reason.TOO_MANY_LIVE_SLOTS,
          "more than "
              + RegionFile.MAX_LIVE_USAGE_ENTRIES
              + " live slots x devices ("
              + deviceCount
              + " devices); not read",
          -1);
    }
    Optional<RegionExtension> extension =
        hasExtension ? Optional.of(readExtension(segment, deviceCount)) : Optional.empty();
    return new RegionSnapshot(
        g.layout,
        major,
        minor,
        ownerPid,
        deviceCount,
        List.of(devices),
        rawProcNum,
        utilizationSwitch,
        recentKernel,
        priority,
        lastKernelTime,
        pass.processes,
        pass.bestEffort,
        pass.tornRetries,
        extension);
  }

  private static int clamp(int rawProcNum) {
    return Math.max(0, Math.min(rawProcNum, Geometry.MAX_PROCS));
  }

  /** The extension block is used only when its magic and major version are ours. */
  public static boolean extensionValid(MemorySegment segment) {
    return Access.intAcquire(segment, Extension.OFFSET + Extension.F_MAGIC) == Extension.MAGIC
        && Access.u16Acquire(segment, Extension.OFFSET + Extension.F_MAJOR) == Extension.MAJOR;
  }

  private static long generation(MemorySegment segment) {
    return Access.longAcquire(segment, Extension.OFFSET + Extension.F_GENERATION);
  }

  private static RegionExtension readExtension(MemorySegment s, int deviceCount) {
    long base = Extension.OFFSET;
    List<ExtensionDevice> devices = new ArrayList<>(deviceCount);
    for (int d = 0; d < deviceCount; d++) {
      devices.add(
          new ExtensionDevice(
              d,
              Access.u64Saturated(s, Extension.device(d, Extension.D_OOM_REJECTIONS)),
              Access.u64Saturated(s, Extension.device(d, Extension.D_OOM_REJECTED_BYTES)),
              Access.u64Saturated(s, Extension.device(d, Extension.D_THROTTLED_NS)),
              Access.u64Saturated(s, Extension.device(d, Extension.D_LAUNCHES_DELAYED)),
              Access.u64Saturated(s, Extension.device(d, Extension.D_LAUNCHES_TOTAL)),
              Access.u64Saturated(s, Extension.device(d, Extension.D_BUSY_NS)),
              Access.u64Saturated(s, Extension.device(d, Extension.D_LIMITER_WINDOW_PPM))));
    }
    return new RegionExtension(
        Access.u16Acquire(s, base + Extension.F_MAJOR),
        Access.u16Acquire(s, base + Extension.F_MINOR),
        Access.longAcquire(s, base + Extension.F_GENERATION),
        Access.longAcquire(s, base + Extension.F_CREATED_NS),
        Text.cString(s, base + Extension.F_LIB_VERSION, Extension.LIB_VERSION_LEN),
        Text.cString(s, base + Extension.F_POD_UID, Extension.POD_UID_LEN),
        Text.cString(s, base + Extension.F_CONTAINER_NAME, Extension.CONTAINER_NAME_LEN),
        Access.intAcquire(s, base + Extension.F_LOCK_HOLDER_PID),
        Access.longAcquire(s, base + Extension.F_LOCK_HOLDER_SINCE_NS),
        devices);
  }

  /** One pass over the slot table; reusable for the redo (which shares the budgets). */
  private static final class Pass {
    private final MemorySegment s;
    private final Geometry g;
    private final int deviceCount;
    private final boolean hasExtension;
    private final long[] usage;
    private List<ProcessSlot> processes = List.of();
    private boolean bestEffort;
    private boolean overfull;
    private int tornRetries;
    private long parkBudgetNanos = PARK_BUDGET_NANOS;

    Pass(MemorySegment s, Geometry g, int deviceCount, boolean hasExtension) {
      this.s = s;
      this.g = g;
      this.deviceCount = deviceCount;
      this.hasExtension = hasExtension;
      this.usage = Scratch.longs(deviceCount * USAGE_FIELDS);
    }

    void run(int slotCount) {
      boolean seqlocked = g.slotSeqlockOffset >= 0;
      boolean bestEffortThisPass = false;
      ArrayList<ProcessSlot> out = new ArrayList<>(); // grows with the live slots only
      PidSet seen = new PidSet();
      int maxLiveSlots = RegionFile.MAX_LIVE_USAGE_ENTRIES / Math.max(1, deviceCount);
      overfull = false;
      for (int i = 0; i < slotCount; i++) {
        long base = g.slotBase(i);
        long seqOffset = base + g.slotSeqlockOffset;
        int pid;
        int hostPid;
        int status;
        int tries = 0;
        while (true) {
          tries++;
          boolean canRetry =
              seqlocked
                  && tries < MAX_TRIES_PER_SLOT
                  && tornRetries < MAX_RETRIES_PER_SNAPSHOT
                  && (tries <= SPIN_TRIES || parkBudgetNanos > 0);
          long before = seqlocked ? Access.longAcquire(s, seqOffset) : 0;
          if ((before & 1) != 0 && canRetry) {
            if (Access.intAcquire(s, base + Geometry.SLOT_PID) == 0
                || Access.intAcquire(s, base + g.slotStatusOffset) == 0) {
              pid = 0; // a free slot (or one being freed): nothing to wait for
              hostPid = 0;
              status = 0;
              break;
            }
            tornRetries++;
            backOff(tries);
            continue;
          }
          pid = Access.intAcquire(s, base + Geometry.SLOT_PID);
          status = Access.intAcquire(s, base + g.slotStatusOffset);
          hostPid = Access.intAcquire(s, base + Geometry.SLOT_HOSTPID);
          if (pid == 0 || status == 0) {
            break; // free slot: nothing the seqlock protects matters
          }
          readUsage(base);
          if (!seqlocked) {
            break;
          }
          VarHandle.acquireFence();
          long after = Access.longAcquire(s, seqOffset);
          if (after == before && (before & 1) == 0) {
            break;
          }
          if (!canRetry) {
            bestEffortThisPass = true;
            break;
          }
          tornRetries++;
          backOff(tries);
        }
        if (pid == 0 || status == 0 || !seen.add(pid)) {
          continue;
        }
        if (out.size() == maxLiveSlots) {
          overfull = true; // what the claim would cost is never allocated
          break;
        }
        out.add(toSlot(i, pid, hostPid, status));
      }
      processes = out;
      bestEffort = bestEffortThisPass;
    }

    private void readUsage(long base) {
      long used = base + g.slotUsedOffset;
      long monitor = base + g.slotMonitorUsedOffset;
      boolean hasUtil = g.slotDeviceUtilOffset >= 0;
      long util = base + g.slotDeviceUtilOffset;
      for (int d = 0, k = 0; d < deviceCount; d++, k += USAGE_FIELDS) {
        long mem = used + (long) g.usedStride * d;
        usage[k] = Access.u64Saturated(s, mem + Geometry.MEM_CONTEXT);
        usage[k + 1] = Access.u64Saturated(s, mem + Geometry.MEM_MODULE);
        usage[k + 2] = Access.u64Saturated(s, mem + Geometry.MEM_DATA);
        usage[k + 3] = Access.u64Saturated(s, mem + Geometry.MEM_TOTAL);
        usage[k + 4] = Access.u64Saturated(s, monitor + 8L * d);
        usage[k + 5] =
            hasUtil
                ? Access.u64Saturated(s, util + (long) g.deviceUtilStride * d + Geometry.UTIL_SM)
                : 0;
      }
    }

    private ProcessSlot toSlot(int index, int pid, int hostPid, int status) {
      DeviceUsage[] devices = new DeviceUsage[deviceCount];
      for (int d = 0, k = 0; d < deviceCount; d++, k += USAGE_FIELDS) {
        devices[d] =
            (usage[k] | usage[k + 1] | usage[k + 2] | usage[k + 3] | usage[k + 4] | usage[k + 5])
                    == 0
                ? ZERO_USAGE[d]
                : new DeviceUsage(
                    d,
                    usage[k],
                    usage[k + 1],
                    usage[k + 2],
                    usage[k + 3],
                    usage[k + 4],
                    usage[k + 5]);
      }
      int pidTag =
          hasExtension ? Access.intAcquire(s, Extension.slot(index, Extension.S_PID_TAG)) : 0;
      // A stale entry (its tag names another process) would lend this slot another process's
      // start time and heartbeat: a live process would look like a reused pid.
      Optional<SlotExtension> extension =
          hasExtension && (pidTag == 0 || pidTag == pid)
              ? Optional.of(
                  new SlotExtension(
                      Access.longAcquire(s, Extension.slot(index, Extension.S_START_TIME_TICKS)),
                      Access.longAcquire(s, Extension.slot(index, Extension.S_HEARTBEAT_NS)),
                      Access.intAcquire(s, Extension.slot(index, Extension.S_HOSTPID_SOURCE))))
              : Optional.empty();
      return new ProcessSlot(index, pid, hostPid, status, List.of(devices), extension);
    }

    /** Spin first, then park with growing pauses (1 µs doubling to 100 µs) within the budget. */
    private void backOff(int tries) {
      if (tries <= SPIN_TRIES) {
        Thread.onSpinWait();
        return;
      }
      long pause = Math.min(1_000L << Math.min(tries - SPIN_TRIES - 1, 7), 100_000L);
      long start = System.nanoTime();
      LockSupport.parkNanos(Math.min(pause, parkBudgetNanos));
      parkBudgetNanos -= Math.max(System.nanoTime() - start, 1);
    }
  }

  /**
   * Open-addressing set of non-zero ints, no boxing per slot. It starts small and doubles with the
   * pids added: its size follows the live slots, never the {@code proc_num} the tenant claims.
   */
  private static final class PidSet {
    private int[] table = new int[16];
    private int size;

    /** Adds a non-zero value; false when it was already present. */
    boolean add(int value) {
      if (!insert(table, value)) {
        return false;
      }
      if (++size * 2 > table.length) {
        int[] bigger = new int[table.length * 2];
        for (int v : table) {
          if (v != 0) {
            insert(bigger, v);
          }
        }
        table = bigger;
      }
      return true;
    }

    private static boolean insert(int[] table, int value) {
      int mask = table.length - 1;
      int i = (value * 0x9E3779B9) >>> 16 & mask;
      while (true) {
        int current = table[i];
        if (current == 0) {
          table[i] = value;
          return true;
        }
        if (current == value) {
          return false;
        }
        i = (i + 1) & mask;
      }
    }
  }
}
