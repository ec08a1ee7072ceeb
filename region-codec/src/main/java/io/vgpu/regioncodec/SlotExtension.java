package io.vgpu.regioncodec;

/**
 * libvgpu's per-slot additions (extension block, indexed like the slots).
 *
 * @param startTimeTicks field 22 of {@code /proc/<pid>/stat} when the slot was claimed (pid reuse
 *     check)
 * @param heartbeatNanos {@code CLOCK_REALTIME} nanoseconds of the process's last liveness tick
 * @param hostPidSource how the hostpid was learned: 0 unknown, 1 same namespace, 2 NSpid, 3 written
 *     back by the exporter
 */
public record SlotExtension(long startTimeTicks, long heartbeatNanos, int hostPidSource) {
  /** Unknown host-pid source. */
  public static final int HOSTPID_UNKNOWN = 0;

  /** The process runs in the host pid namespace. */
  public static final int HOSTPID_SAME_NAMESPACE = 1;

  /** Read from {@code /proc/self/status} NSpid. */
  public static final int HOSTPID_NSPID = 2;

  /** Written back by the node exporter. */
  public static final int HOSTPID_EXPORTER = 3;

  /** An all-zero slot extension. */
  public static final SlotExtension EMPTY = new SlotExtension(0, 0, HOSTPID_UNKNOWN);
}
