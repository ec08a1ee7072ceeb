package io.vgpu.regioncodec;

/**
 * The HAMi-core shared-region layouts this codec reads and writes.
 *
 * <p>The layout is chosen from the file's size first and its version fields second (see {@link
 * RegionFile#openReadOnly}); the version fields alone cannot tell {@link #V1_1_BROKEN} from {@link
 * #V1_1}.
 */
public enum Layout {
  /** HAMi-core's initial layout (2024-01): no version fields, no per-process device utilization. */
  L0A("L0a", 804_680L, false, false),
  /** HAMi's "v0" (2024-04): adds per-process device utilization; still no version fields. */
  L0B("L0b", 1_197_896L, false, false),
  /** Version 1.1 (2024-08): version fields, padded slots, last kernel time. */
  V1_1("v1.1", 2_008_952L, true, false),
  /**
   * The short-lived layout of 2026-03 that still says 1.1 but shifts every slot field by 8 bytes
   * (seqlock after hostpid) and every header field after the semaphore by 32 bytes.
   */
  V1_1_BROKEN("v1.1-broken", 2_008_984L, true, false),
  /** Version 1.2 (current): v1.1's bytes with a per-slot seqlock in the old padding. */
  V1_2("v1.2", 2_008_952L, true, true);

  private final String label;
  private final long structSize;
  private final boolean hasVersionFields;
  private final boolean seqlockValid;

  Layout(String label, long structSize, boolean hasVersionFields, boolean seqlockValid) {
    this.label = label;
    this.structSize = structSize;
    this.hasVersionFields = hasVersionFields;
    this.seqlockValid = seqlockValid;
  }

  /** {@code sizeof(shared_region_t)}; files written by the library are one byte longer. */
  public long structSize() {
    return structSize;
  }

  /** Whether the region carries {@code major_version}/{@code minor_version} at offsets 4 and 8. */
  public boolean hasVersionFields() {
    return hasVersionFields;
  }

  /** Whether writers maintain the per-slot seqlock by the v1.2 protocol (only {@link #V1_2}). */
  public boolean seqlockValid() {
    return seqlockValid;
  }

  /** A short, stable name for logs and metric labels, e.g. {@code "v1.2"} or {@code "L0a"}. */
  public String label() {
    return label;
  }
}
