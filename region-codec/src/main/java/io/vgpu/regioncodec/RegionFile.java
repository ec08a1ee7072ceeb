package io.vgpu.regioncodec;

import io.vgpu.regioncodec.RegionException.Reason;
import io.vgpu.regioncodec.internal.Access;
import io.vgpu.regioncodec.internal.Detector;
import io.vgpu.regioncodec.internal.Geometry;
import io.vgpu.regioncodec.internal.Opener;
import io.vgpu.regioncodec.internal.RegionReader;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.util.Objects;
import java.util.Set;

/**
 * One memory-mapped HAMi shared-region file.
 *
 * <p>Opening checks the file type without following links and without blocking (a FIFO is refused,
 * never opened for reading), reads the magic and version fields, chooses the {@link Layout} and
 * maps only the bytes that layout needs. Every {@link #snapshot()} re-checks the file size first
 * and turns a fault from a file truncated under the mapping into a {@link RegionIoException} with
 * {@link Reason#TRUNCATED}; the JVM survives.
 *
 * <p>Thread-safety: {@link #snapshot()}, {@link #changedOnDisk()} and the {@link RegionWriter}
 * methods may be called from any thread concurrently. {@link #close()} while another thread reads
 * makes that read fail with {@link IllegalStateException}.
 *
 * <p><b>Warning:</b> the mapping stays valid until {@link #close()}; a recreated file (new inode)
 * is not followed. Poll {@link #changedOnDisk()} and reopen.
 */
public final class RegionFile implements AutoCloseable {
  /** {@code CUDA_DEVICE_MAX_COUNT}. */
  public static final int MAX_DEVICES = 16;

  /** {@code SHARED_REGION_MAX_PROCESS_NUM}. */
  public static final int MAX_PROCESSES = 1024;

  /**
   * Live slots times devices one snapshot materialises at most (each a {@link DeviceUsage}): a full
   * table on one GPU, 128 processes on 8. The slot table is the tenant's, so without a bound a
   * region claiming all 1024 slots live on 16 devices cost ~1 MiB of heap per copy held; past the
   * bound the snapshot fails with {@link RegionException.Reason#TOO_MANY_LIVE_SLOTS} (reported as
   * an unreadable region, never silently cut).
   */
  public static final int MAX_LIVE_USAGE_ENTRIES = 1024;

  /**
   * Files larger than this are refused ({@link Reason#TOO_LARGE}): 16 MiB, 8x the largest layout.
   */
  public static final long MAX_FILE_SIZE = Detector.MAX_FILE_SIZE;

  private final Path path;
  private final FileChannel channel;
  private final Arena arena;
  private final MemorySegment segment;
  private final Geometry geometry;
  private final FileIdentity identity;
  private final boolean writable;
  private final boolean extensionMapped;
  private final int openedMajor;
  private final int openedMinor;

  private RegionFile(
      Path path,
      FileChannel channel,
      Arena arena,
      MemorySegment segment,
      Geometry geometry,
      FileIdentity identity,
      boolean writable,
      boolean extensionMapped,
      int openedMajor,
      int openedMinor) {
    this.path = path;
    this.channel = channel;
    this.arena = arena;
    this.segment = segment;
    this.geometry = geometry;
    this.identity = identity;
    this.writable = writable;
    this.extensionMapped = extensionMapped;
    this.openedMajor = openedMajor;
    this.openedMinor = openedMinor;
  }

  /**
   * Opens and maps {@code path} read-only.
   *
   * @throws RegionIoException the path is a link or not a regular file, cannot be opened or read
   * @throws RegionFormatException the file is too small, too large or lacks the magic
   * @throws UnsupportedLayoutException the size or version matches no known layout
   */
  public static RegionFile openReadOnly(Path path) {
    return open(path, false, Set.of());
  }

  /**
   * Opens and maps {@code path} read-write, for {@link #writer()}. Same checks and exceptions as
   * {@link #openReadOnly(Path)}.
   */
  public static RegionFile openReadWrite(Path path) {
    return open(path, true, Set.of());
  }

  /**
   * Opens and maps {@code path} read-write only when it has exactly one name and, when {@code
   * owners} is not empty, one of those owners ({@link Reason#HARD_LINK}, {@link Reason#WRONG_OWNER}
   * otherwise). {@link #openReadWrite(Path)} checks the link count too.
   */
  public static RegionFile openReadWrite(Path path, Set<Integer> owners) {
    return open(path, true, owners);
  }

  // The arena and channel are owned by the returned RegionFile and closed by its close().
  @SuppressWarnings("MustBeClosedChecker")
  private static RegionFile open(Path path, boolean writable, Set<Integer> owners) {
    Objects.requireNonNull(path, "path");
    Opener.Opened opened = Opener.open(path, writable, owners);
    FileChannel channel = opened.channel();
    Arena arena = null;
    try {
      long size = channel.size();
      if (size < Detector.HEADER_PROBE || size > MAX_FILE_SIZE) {
        Detector.detect(size, 0, 0, 0); // throws TOO_SMALL or TOO_LARGE
      }
      ByteBuffer probe = ByteBuffer.allocate(Detector.HEADER_PROBE).order(ByteOrder.LITTLE_ENDIAN);
      while (probe.hasRemaining()) {
        if (channel.read(probe, probe.position()) < 0) {
          throw new RegionIoException(
              Reason.TRUNCATED, path + " shrank while its header was being read", null);
        }
      }
      int magic = probe.getInt(0);
      int major = probe.getInt(4);
      int minor = probe.getInt(8);
      Layout layout = Detector.detect(size, magic, major, minor);
      long length = Detector.mappedLength(layout, size);
      arena = Arena.ofShared();
      MemorySegment segment =
          channel.map(
              writable ? FileChannel.MapMode.READ_WRITE : FileChannel.MapMode.READ_ONLY,
              0,
              length,
              arena);
      return new RegionFile(
          path,
          channel,
          arena,
          segment,
          Geometry.of(layout),
          opened.identity(),
          writable,
          length > layout.structSize(),
          major,
          minor);
    } catch (IOException e) {
      closeAll(channel, arena);
      throw new RegionIoException(Reason.IO_ERROR, "cannot read " + path + ": " + e, e);
    } catch (RuntimeException | Error e) {
      closeAll(channel, arena);
      throw e;
    }
  }

  private static void closeAll(FileChannel channel, Arena arena) {
    if (arena != null) {
      arena.close();
    }
    try {
      channel.close();
    } catch (IOException ignored) {
      // abandoning the channel anyway
    }
  }

  /** The path this file was opened from. */
  public Path path() {
    return path;
  }

  /** The layout chosen at open time. */
  public Layout layout() {
    return geometry.layout;
  }

  /** The identity of the file when it was opened. */
  public FileIdentity identity() {
    return identity;
  }

  /** Whether the file was opened read-write. */
  public boolean writable() {
    return writable;
  }

  /**
   * Whether the path now names a different file or a different size than at open time (or nothing).
   * Never throws.
   */
  public boolean changedOnDisk() {
    FileIdentity now = Opener.identityOrNull(path);
    return now == null || !now.sameFileAndSize(identity);
  }

  /**
   * A consistent snapshot by the reader protocol (see {@link RegionSnapshot}).
   *
   * @throws RegionIoException TRUNCATED when the file shrank below the mapping, IO_ERROR when it
   *     cannot be checked
   * @throws RegionFormatException BAD_MAGIC when the magic was overwritten since open
   * @throws UnsupportedLayoutException UNKNOWN_VERSION when the version fields changed so the
   *     layout no longer applies
   * @throws IllegalStateException after {@link #close()}
   */
  public RegionSnapshot snapshot() {
    checkSize();
    try {
      checkHeader();
      return RegionReader.snapshot(segment, geometry, extensionMapped);
    } catch (InternalError e) {
      // The JVM turns SIGBUS on a mapping whose file was truncated into an InternalError.
      throw truncated(e);
    }
  }

  /**
   * The value of HAMi-core's slot-table semaphore: 1 when free, 0 while taken (a process-shared
   * glibc {@code sem_t} keeps its value in the low 32 bits of its first word, on x86_64 and aarch64
   * alike). A semaphore that is taken while {@code owner_pid} records no holder is either a holder
   * between its wait and its store (microseconds) or HAMi's lost post after a killed holder (HAMi
   * #2500), which blocks every process of the container until it is posted.
   *
   * @throws RegionIoException TRUNCATED when the file shrank below the mapping
   * @throws IllegalStateException after {@link #close()}
   */
  public int semaphoreValue() {
    checkSize();
    try {
      return Access.intAcquire(segment, geometry.semOffset);
    } catch (InternalError e) {
      throw truncated(e);
    }
  }

  /**
   * The writer for single-field updates.
   *
   * @throws IllegalStateException when the file was opened read-only
   */
  public RegionWriter writer() {
    if (!writable) {
      throw new IllegalStateException(path + " was opened read-only; use openReadWrite");
    }
    return new RegionWriter(
        new RegionWriter.Target(
            segment, geometry, extensionMapped, this::checkSize, this::truncated));
  }

  MemorySegment segment() {
    return segment;
  }

  Geometry geometry() {
    return geometry;
  }

  boolean extensionMapped() {
    return extensionMapped;
  }

  void checkSize() {
    if (!arena.scope().isAlive()) {
      throw new IllegalStateException(path + " is closed");
    }
    long size;
    try {
      size = channel.size();
    } catch (IOException e) {
      throw new RegionIoException(Reason.IO_ERROR, "cannot stat " + path + ": " + e, e);
    }
    if (size < segment.byteSize()) {
      throw new RegionIoException(
          Reason.TRUNCATED,
          path
              + " shrank to "
              + size
              + " bytes, below the "
              + segment.byteSize()
              + " mapped; reopen it",
          null);
    }
  }

  RegionIoException truncated(InternalError e) {
    return new RegionIoException(
        Reason.TRUNCATED, path + " faulted while mapped (truncated or replaced); reopen it", e);
  }

  private void checkHeader() {
    int magic = Access.intAcquire(segment, 0);
    int major = geometry.majorOffset >= 0 ? Access.intAcquire(segment, geometry.majorOffset) : 0;
    int minor = geometry.minorOffset >= 0 ? Access.intAcquire(segment, geometry.minorOffset) : 0;
    if (magic == Geometry.MAGIC && major == openedMajor && minor == openedMinor) {
      return;
    }
    Layout now = Detector.detect(identity.size(), magic, major, minor);
    if (now != geometry.layout) {
      throw new UnsupportedLayoutException(
          Reason.UNKNOWN_VERSION,
          path
              + " was opened as "
              + geometry.layout.label()
              + " but its version fields now say "
              + Integer.toUnsignedString(major)
              + "."
              + Integer.toUnsignedString(minor)
              + "; reopen it",
          identity.size(),
          Integer.toUnsignedLong(major),
          Integer.toUnsignedLong(minor));
    }
  }

  /** Unmaps the file and closes the channel. Idempotent. */
  @Override
  public void close() {
    synchronized (this) {
      if (!arena.scope().isAlive()) {
        return;
      }
      closeAll(channel, arena);
    }
  }

  @Override
  public String toString() {
    return "RegionFile[" + path + ", " + geometry.layout.label() + ", " + identity + "]";
  }
}
