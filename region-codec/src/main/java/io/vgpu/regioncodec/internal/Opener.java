package io.vgpu.regioncodec.internal;

import io.vgpu.regioncodec.FileIdentity;
import io.vgpu.regioncodec.SafeOpen;
import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.util.Map;
import java.util.Set;

/**
 * Opens a region file through {@link SafeOpen}: relative to its directory, without following any
 * link, without opening a FIFO or device for I/O, type (and for writes link count and owner)
 * checked on the descriptor before the file is opened for reading or writing. There is no
 * check-then-open fallback: where {@link SafeOpen} is unavailable, nothing is opened.
 */
public final class Opener {
  private Opener() {}

  private static final String UNIX_ATTRIBUTES = "unix:dev,ino,size,lastModifiedTime";

  /** An open channel and the identity of the file it refers to. */
  public record Opened(FileChannel channel, FileIdentity identity) {}

  /**
   * Opens {@code path} for reading (and writing when {@code writable}, then only a singly linked
   * file of one of {@code owners} when given).
   *
   * @throws io.vgpu.regioncodec.RegionIoException SYMLINK, NOT_REGULAR_FILE, HARD_LINK,
   *     WRONG_OWNER, PERMISSION_DENIED or IO_ERROR
   */
  public static Opened open(Path path, boolean writable, Set<Integer> owners) {
    Path absolute = path.toAbsolutePath();
    Path dir = absolute.getParent();
    if (dir == null || absolute.getFileName() == null) {
      throw new IllegalArgumentException("not a file path: " + path);
    }
    SafeOpen.Opened o =
        SafeOpen.open(
            dir,
            absolute.getFileName(),
            writable,
            writable ? SafeOpen.Expect.writable(owners) : SafeOpen.Expect.anyRegularFile());
    return new Opened(o.channel(), o.stat().identity());
  }

  /** Whether opens go through the safe path (false: every open is refused). */
  public static boolean nonBlockingOpenAvailable() {
    return SafeOpen.available();
  }

  /** The identity of {@code path} without following links, or null when it is gone. */
  public static FileIdentity identityOrNull(Path path) {
    try {
      Map<String, Object> a =
          Files.readAttributes(path, UNIX_ATTRIBUTES, LinkOption.NOFOLLOW_LINKS);
      long nanos = NativeFs.epochNanos((FileTime) a.get("lastModifiedTime"));
      return new FileIdentity(
          ((Number) a.get("dev")).longValue(),
          ((Number) a.get("ino")).longValue(),
          ((Number) a.get("size")).longValue(),
          nanos);
    } catch (IOException | RuntimeException e) {
      return null;
    }
  }
}
