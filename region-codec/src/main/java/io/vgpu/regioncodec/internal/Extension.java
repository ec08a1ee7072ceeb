package io.vgpu.regioncodec.internal;

/** Offsets of libvgpu's extension block ({@code vgpu_region_ext_t} in {@code vgpu_region.h}). */
public final class Extension {
  private Extension() {}

  public static final long OFFSET = 2_008_960L;
  public static final int MAGIC = 0x5458_4556; // "VEXT" little-endian
  public static final int MAJOR = 1;
  public static final int MINOR = 0;
  public static final int LIB_VERSION_LEN = 32;
  public static final int POD_UID_LEN = 64;
  public static final int CONTAINER_NAME_LEN = 256;

  public static final int F_MAGIC = 0;
  public static final int F_MAJOR = 4;
  public static final int F_MINOR = 6;
  public static final int F_SIZE = 8;
  public static final int F_FLAGS = 12;
  public static final int F_GENERATION = 16;
  public static final int F_CREATED_NS = 24;
  public static final int F_LIB_VERSION = 32;
  public static final int F_POD_UID = 64;
  public static final int F_CONTAINER_NAME = 128;
  public static final int F_LOCK_HOLDER_SINCE_NS = 384;
  public static final int F_LOCK_HOLDER_PID = 392;
  public static final int F_DEVICES = 448;
  public static final int DEVICE_SIZE = 64;
  public static final int F_SLOTS = F_DEVICES + 16 * DEVICE_SIZE; // 1472
  public static final int SLOT_SIZE = 32;
  public static final int SIZE = F_SLOTS + 1024 * SLOT_SIZE; // 34 240

  // vgpu_ext_device_t
  public static final int D_OOM_REJECTIONS = 0;
  public static final int D_OOM_REJECTED_BYTES = 8;
  public static final int D_THROTTLED_NS = 16;
  public static final int D_LAUNCHES_DELAYED = 24;
  public static final int D_LAUNCHES_TOTAL = 32;
  public static final int D_BUSY_NS = 40;
  public static final int D_LIMITER_WINDOW_PPM = 48;

  // vgpu_ext_slot_t
  public static final int S_START_TIME_TICKS = 0;
  public static final int S_HEARTBEAT_NS = 8;
  public static final int S_HOSTPID_SOURCE = 16;

  /**
   * The {@code procs[i].pid} the entry describes; 0 in files written before the tag existed.
   * HAMi-core's compaction moves {@code procs[]} without moving the extension, so an entry whose
   * tag names another process is stale.
   */
  public static final int S_PID_TAG = 20;

  /** Size of a file with the extension block: {@code VGPU_REGION_FILE_SIZE}. */
  public static final long FILE_SIZE = OFFSET + SIZE;

  public static long device(int device, int field) {
    return OFFSET + F_DEVICES + (long) DEVICE_SIZE * device + field;
  }

  public static long slot(int slot, int field) {
    return OFFSET + F_SLOTS + (long) SLOT_SIZE * slot + field;
  }
}
