package io.vgpu.regioncodec;

/**
 * libvgpu's per-device counters from the extension block (unsigned 64-bit in the file, saturated to
 * {@link Long#MAX_VALUE}).
 *
 * @param index device index, in {@code [0, 16)}
 * @param oomRejections allocations refused by the memory limit
 * @param oomRejectedBytes bytes those allocations asked for
 * @param throttledNanos time launches spent waiting in the SM limiter
 * @param launchesDelayed launches that waited at all
 * @param launchesTotal launches seen by the limiter
 * @param busyNanos GPU busy time the limiter measured for this container
 * @param limiterWindowPpm the last window's measured share, parts per million
 */
public record ExtensionDevice(
    int index,
    long oomRejections,
    long oomRejectedBytes,
    long throttledNanos,
    long launchesDelayed,
    long launchesTotal,
    long busyNanos,
    long limiterWindowPpm) {
  /** Validates ranges. */
  public ExtensionDevice {
    Checks.index(index, RegionFile.MAX_DEVICES, "index");
    Checks.nonNegative(oomRejections, "oomRejections");
    Checks.nonNegative(oomRejectedBytes, "oomRejectedBytes");
    Checks.nonNegative(throttledNanos, "throttledNanos");
    Checks.nonNegative(launchesDelayed, "launchesDelayed");
    Checks.nonNegative(launchesTotal, "launchesTotal");
    Checks.nonNegative(busyNanos, "busyNanos");
    Checks.nonNegative(limiterWindowPpm, "limiterWindowPpm");
  }

  /** All counters zero. */
  public static ExtensionDevice zero(int index) {
    return new ExtensionDevice(index, 0, 0, 0, 0, 0, 0, 0);
  }
}
