package io.vgpu.exporter.discovery;

/**
 * Makes a fault of a mapped load or store surface inside the {@code try} that made it.
 *
 * <p>A load or store into a mapped region can raise SIGBUS without the file having shrunk: a page
 * the filesystem cannot provide, typically a hole of a sparse region file (created with ftruncate)
 * when the filesystem is full (a store on ext4/xfs; on tmpfs even a load). The JVM turns that into
 * {@link InternalError}, synchronously in the interpreter but, in compiled code, as an asynchronous
 * exception thrown at the thread's next safepoint poll or native transition, which can lie after
 * the {@code try} around the access (measured: every fault escaped a narrow catch once the code was
 * compiled). Calling {@link #deliverPending()} as the last statement of that {@code try} puts such
 * a point inside it.
 */
public final class MappedFaults {
  private MappedFaults() {}

  /**
   * What a faulted load on a file that kept its size means, in the one wording every reader of
   * mapped regions (discovery's log, the evidence pass's region error) gives.
   */
  public static final String LOAD_FAULT =
      "reading the mapping faulted although the file kept its size (a page the filesystem cannot"
          + " provide: a hole of a sparse file on a full tmpfs?)";

  /**
   * A cheap JNI call (no system call, no lock): on its return to Java the JVM throws a pending
   * {@link InternalError} from an earlier faulting access of this thread, if any.
   */
  public static void deliverPending() {
    var _ = Runtime.getRuntime().freeMemory();
  }
}
