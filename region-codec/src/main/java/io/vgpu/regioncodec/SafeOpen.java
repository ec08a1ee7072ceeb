package io.vgpu.regioncodec;

import io.vgpu.regioncodec.RegionException.Reason;
import io.vgpu.regioncodec.internal.NativeFs;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.FileTime;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The one way the exporter opens a file a tenant controls: a cache file, a path inside a
 * container's root ({@code /proc/<pid>/root/etc/ld.so.preload}), a region it writes to.
 *
 * <ol>
 *   <li>The trusted directory (the cache root's container directory, {@code /proc/<pid>/root}) is
 *       opened as a descriptor; everything below it is resolved relative to that descriptor without
 *       following any symbolic link, absolute or relative, and without leaving it: {@code
 *       openat2(RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)} where the kernel
 *       has it (5.6+), else one {@code openat(O_NOFOLLOW)} per component with {@code ..} refused.
 *   <li>The name is opened {@code O_PATH}: a FIFO, socket or device is never really opened, so
 *       nothing blocks and no driver's open routine runs.
 *   <li>The descriptor is checked: regular file, size bound, link count 1 and owner when asked.
 *   <li>Only then is that same file (the inode the descriptor holds, through {@code
 *       /proc/self/fd/N}, which no tenant can redirect) opened for reading or writing.
 * </ol>
 *
 * The same code runs on every architecture: the calls go through the FFM linker and the only
 * per-architecture values (two {@code O_*} flags) are confirmed against the kernel at start. When
 * no table is confirmed (an unknown architecture, no {@code /proc}), every open is refused: a
 * tenant file is never opened the unsafe way.
 */
public final class SafeOpen {
  private SafeOpen() {}

  private static final int S_IFMT = 0170000;
  private static final int S_IFREG = 0100000;
  private static final int S_IFLNK = 0120000;
  private static final String ATTRIBUTES = "unix:dev,ino,mode,nlink,uid,size,lastModifiedTime";

  /**
   * What the open descriptor showed.
   *
   * @param device {@code st_dev}
   * @param inode {@code st_ino}
   * @param mode {@code st_mode}
   * @param links {@code st_nlink}
   * @param owner {@code st_uid}
   * @param size {@code st_size}
   * @param mtimeNanos modification time, nanoseconds since the epoch
   */
  public record Stat(
      long device, long inode, int mode, long links, int owner, long size, long mtimeNanos) {
    public boolean regularFile() {
      return (mode & S_IFMT) == S_IFREG;
    }

    public boolean symlink() {
      return (mode & S_IFMT) == S_IFLNK;
    }

    /** {@code DEV:INO} in decimal, as shrreg-tool's {@code --expect-inode} takes it. */
    public String deviceAndInode() {
      return Long.toUnsignedString(device) + ":" + Long.toUnsignedString(inode);
    }

    /** The identity region-codec tracks for remapping. */
    public FileIdentity identity() {
      return new FileIdentity(device, inode, Math.max(0, size), mtimeNanos);
    }
  }

  /**
   * What the file must be, beyond a regular file.
   *
   * @param maxSize larger files are refused ({@link Reason#TOO_LARGE}); Long.MAX_VALUE for none
   * @param singleLink refuse a file with more than one name ({@link Reason#HARD_LINK})
   * @param owners refuse a file owned by anyone else ({@link Reason#WRONG_OWNER}); empty: any
   */
  public record Expect(long maxSize, boolean singleLink, Set<Integer> owners) {
    public Expect {
      owners = Set.copyOf(owners);
    }

    /** Any regular file. */
    public static Expect anyRegularFile() {
      return new Expect(Long.MAX_VALUE, false, Set.of());
    }

    /** What is written must have exactly one name: a hard link would carry the write elsewhere. */
    public static Expect writable(Set<Integer> owners) {
      return new Expect(Long.MAX_VALUE, true, owners);
    }
  }

  /** An open channel to the checked file and what the check saw. */
  public record Opened(FileChannel channel, Stat stat) implements AutoCloseable {
    @Override
    public void close() throws IOException {
      channel.close();
    }
  }

  /** Whether safe opens work here (false: every open is refused). */
  public static boolean available() {
    return NativeFs.get() != null;
  }

  /** "openat2" or "walk", and the flag family confirmed; for logs and tests. */
  public static String describe() {
    NativeFs fs = NativeFs.get();
    return fs == null
        ? "unavailable"
        : fs.resolver().name().toLowerCase(java.util.Locale.ROOT) + "/" + fs.flagFamily();
  }

  /**
   * Opens {@code relative} below {@code trustedDir} for reading (and writing when {@code writable})
   * after checking it as described in the class comment.
   *
   * @throws RegionIoException SYMLINK, NOT_REGULAR_FILE, HARD_LINK, WRONG_OWNER, PERMISSION_DENIED
   *     or IO_ERROR; TOO_LARGE comes as a {@link RegionIoException} too
   */
  @SuppressWarnings("MustBeClosedChecker") // the caller owns the returned channel
  public static Opened open(Path trustedDir, Path relative, boolean writable, Expect expect) {
    return open(trustedDir, relative, writable, expect, false);
  }

  private static Opened open(
      Path trustedDir, Path relative, boolean writable, Expect expect, boolean sameMount) {
    NativeFs fs = NativeFs.get();
    Path shown = trustedDir.resolve(relative);
    if (fs == null) {
      throw new RegionIoException(
          Reason.IO_ERROR,
          "refusing to open "
              + shown
              + ": no safe open on this platform (Linux with /proc and the FFM linker needed)",
          null);
    }
    int dirFd;
    try {
      dirFd = fs.openTrustedDirectory(trustedDir.toString());
    } catch (NativeFs.Errno e) {
      throw failure(shown, e);
    }
    try {
      int fd;
      try {
        fd = fs.openBeneath(dirFd, components(relative), sameMount);
      } catch (NativeFs.Errno e) {
        if (sameMount && e.crossDevice()) {
          throw otherFilesystem(shown, trustedDir);
        }
        throw failure(shown, e);
      }
      try {
        Path byDescriptor = Path.of("/proc/self/fd/" + fd);
        Stat stat = stat(byDescriptor, shown);
        if (sameMount
            && stat.device() != stat(Path.of("/proc/self/fd/" + dirFd), trustedDir).device()) {
          // The walk resolver crossed a mount (openat2 refuses with EXDEV before this).
          throw otherFilesystem(shown, trustedDir);
        }
        check(shown, stat, expect);
        FileChannel channel;
        try {
          channel =
              writable
                  ? FileChannel.open(
                      byDescriptor, StandardOpenOption.READ, StandardOpenOption.WRITE)
                  : FileChannel.open(byDescriptor, StandardOpenOption.READ);
        } catch (java.nio.file.AccessDeniedException e) {
          throw new RegionIoException(
              Reason.PERMISSION_DENIED, "no permission to open " + shown, e);
        } catch (IOException e) {
          throw new RegionIoException(Reason.IO_ERROR, "cannot open " + shown + ": " + e, e);
        }
        return new Opened(channel, stat);
      } finally {
        fs.closeQuietly(fd);
      }
    } finally {
      fs.closeQuietly(dirFd);
    }
  }

  /** Why a small read came back empty. */
  public enum Unread {
    MISSING,
    SYMLINK,
    NOT_REGULAR_FILE,
    TOO_LARGE,
    UNREADABLE
  }

  /**
   * Either the bytes or why there are none. A class, not a record: a record of an array would
   * compare by the array's identity, and the bytes are a fresh copy no one else holds.
   */
  public static final class Small {
    private final byte[] bytes;
    private final Unread why;

    Small(byte[] bytes, Unread why) {
      this.bytes = bytes;
      this.why = why;
    }

    /** The content (an empty array when {@link #why} is set); the caller's own copy. */
    public byte[] bytes() {
      return bytes;
    }

    /** Why nothing was read, or null. */
    public Unread why() {
      return why;
    }

    public boolean read() {
      return why == null;
    }
  }

  /**
   * Reads a whole small file below {@code trustedDir} the safe way; a file larger than {@code
   * maxBytes} is not read at all. Never throws for what the tenant did.
   */
  public static Small readSmall(Path trustedDir, Path relative, int maxBytes) {
    return readSmall(trustedDir, relative, maxBytes, false);
  }

  /**
   * Like {@link #readSmall(Path, Path, int)}, but only from {@code trustedDir}'s own filesystem: a
   * file reached across a mount point below it (a FUSE or NFS mount a tenant made in its container,
   * whose reads it can stall for ever) is refused ({@link Unread#UNREADABLE}) unread.
   */
  public static Small readSmallOnOneMount(Path trustedDir, Path relative, int maxBytes) {
    return readSmall(trustedDir, relative, maxBytes, true);
  }

  private static Small readSmall(Path trustedDir, Path relative, int maxBytes, boolean sameMount) {
    try (Opened o =
        open(trustedDir, relative, false, new Expect(maxBytes, false, Set.of()), sameMount)) {
      ByteBuffer buffer = ByteBuffer.allocate((int) o.stat().size());
      while (buffer.hasRemaining() && o.channel().read(buffer) > 0) {
        // read until full or end of file (the file may have shrunk)
      }
      byte[] out = new byte[buffer.position()];
      buffer.flip().get(out);
      return new Small(out, null);
    } catch (RegionIoException e) {
      Unread why =
          switch (e.reason()) {
            case SYMLINK -> Unread.SYMLINK;
            case NOT_REGULAR_FILE -> Unread.NOT_REGULAR_FILE;
            case TOO_LARGE -> Unread.TOO_LARGE;
            default ->
                e.getMessage() != null && e.getMessage().endsWith("does not exist")
                    ? Unread.MISSING
                    : Unread.UNREADABLE;
          };
      return new Small(new byte[0], why);
    } catch (IOException | RuntimeException e) {
      return new Small(new byte[0], Unread.UNREADABLE);
    }
  }

  private static List<String> components(Path relative) {
    if (relative.isAbsolute()) {
      throw new IllegalArgumentException("must be relative to the trusted directory: " + relative);
    }
    List<String> out = new ArrayList<>();
    for (Path p : relative) {
      out.add(p.toString());
    }
    return out;
  }

  private static Stat stat(Path byDescriptor, Path shown) {
    Map<String, Object> a;
    try {
      a = java.nio.file.Files.readAttributes(byDescriptor, ATTRIBUTES);
    } catch (IOException | UnsupportedOperationException e) {
      throw new RegionIoException(Reason.IO_ERROR, "cannot stat " + shown + ": " + e, e);
    }
    long nanos = NativeFs.epochNanos((FileTime) a.get("lastModifiedTime"));
    return new Stat(
        ((Number) a.get("dev")).longValue(),
        ((Number) a.get("ino")).longValue(),
        (Integer) a.get("mode"),
        ((Number) a.get("nlink")).longValue(),
        (Integer) a.get("uid"),
        ((Number) a.get("size")).longValue(),
        nanos);
  }

  private static void check(Path shown, Stat stat, Expect expect) {
    if (stat.symlink()) {
      throw new RegionIoException(
          Reason.SYMLINK, shown + " is a symbolic link; tenant files are never followed", null);
    }
    if (!stat.regularFile()) {
      throw new RegionIoException(
          Reason.NOT_REGULAR_FILE,
          shown
              + " is not a regular file (mode 0"
              + Integer.toOctalString(stat.mode() & S_IFMT)
              + ")",
          null);
    }
    if (stat.size() > expect.maxSize()) {
      throw new RegionIoException(
          Reason.TOO_LARGE, shown + " is larger than " + expect.maxSize() + " bytes", null);
    }
    if (expect.singleLink() && stat.links() != 1) {
      throw new RegionIoException(
          Reason.HARD_LINK,
          shown + " has " + stat.links() + " names (hard links); refusing to write through it",
          null);
    }
    if (!expect.owners().isEmpty() && !expect.owners().contains(stat.owner())) {
      throw new RegionIoException(
          Reason.WRONG_OWNER,
          shown + " is owned by uid " + stat.owner() + ", not one of " + expect.owners(),
          null);
    }
  }

  private static RegionIoException otherFilesystem(Path shown, Path trustedDir) {
    return new RegionIoException(
        Reason.IO_ERROR,
        shown + " is reached across a mount point below " + trustedDir + "; not opened",
        null);
  }

  private static RegionIoException failure(Path shown, NativeFs.Errno e) {
    if (e.symlink()) {
      return new RegionIoException(
          Reason.SYMLINK, shown + " goes through a symbolic link; never followed", null);
    }
    if (e.missing()) {
      return new RegionIoException(Reason.IO_ERROR, shown + " does not exist", null);
    }
    if (e.denied()) {
      return new RegionIoException(
          Reason.PERMISSION_DENIED, "no permission to open " + shown, null);
    }
    if (e.notDirectory()) {
      return new RegionIoException(
          Reason.IO_ERROR,
          shown + ": a directory on the way is a symbolic link or not a directory",
          null);
    }
    return new RegionIoException(
        Reason.IO_ERROR, "cannot open " + shown + ": " + e.getMessage(), null);
  }
}
