package io.vgpu.regioncodec.internal;

import io.vgpu.regioncodec.FileIdentity;
import io.vgpu.regioncodec.RegionException.Reason;
import io.vgpu.regioncodec.RegionIoException;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.nio.channels.FileChannel;
import java.nio.file.AccessDeniedException;
import java.nio.file.FileSystemLoopException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.OpenOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.FileTime;
import java.util.Map;

/**
 * Opens a region file without ever blocking and without following links.
 *
 * <p>A tenant controls the directory the file lives in, so between our type check and our open it
 * can swap the file for a FIFO (an ordinary open would then block until a writer appears). On Linux
 * x86_64 the file is therefore opened with {@code O_NONBLOCK | O_NOFOLLOW} through the FFM linker,
 * its type is checked on the open descriptor, and the {@link FileChannel} is opened on {@code
 * /proc/self/fd/N}, which names exactly that file. Elsewhere (or without {@code /proc}) it falls
 * back to check-then-open, which has that small race.
 */
public final class Opener {
  private Opener() {}

  private static final String UNIX_ATTRIBUTES = "unix:dev,ino,size,lastModifiedTime,mode";

  private static final int S_IFMT = 0170000;
  private static final int S_IFREG = 0100000;
  private static final int S_IFLNK = 0120000;

  private static final int O_RDONLY = 0;
  private static final int O_RDWR = 2;
  private static final int O_NONBLOCK = 04000;
  private static final int O_NOFOLLOW = 0400000;
  private static final int O_CLOEXEC = 02000000;
  private static final int EACCES = 13;
  private static final int EPERM = 1;
  private static final int ELOOP = 40;
  private static final int ENOENT = 2;

  /** An open channel and the identity of the file it refers to. */
  public record Opened(FileChannel channel, FileIdentity identity) {}

  private static final Native NATIVE = Native.load();

  /** close(2) failures on descriptors this class opened (diagnostics only; never expected). */
  static final java.util.concurrent.atomic.AtomicLong CLOSE_FAILURES =
      new java.util.concurrent.atomic.AtomicLong();

  /**
   * Opens {@code path} for reading (and writing when {@code writable}).
   *
   * @throws RegionIoException SYMLINK, NOT_REGULAR_FILE, PERMISSION_DENIED or IO_ERROR
   */
  public static Opened open(Path path, boolean writable) {
    Map<String, Object> before = stat(path, LinkOption.NOFOLLOW_LINKS);
    checkType(path, before);
    if (NATIVE != null) {
      Opened opened = NATIVE.open(path, writable);
      if (opened != null) {
        return opened;
      }
    }
    return openPlain(path, writable);
  }

  /** Whether opens go through {@code O_NONBLOCK | O_NOFOLLOW} (Linux x86_64 with /proc). */
  public static boolean nonBlockingOpenAvailable() {
    return NATIVE != null;
  }

  /** The identity of {@code path} without following links, or null when it is gone. */
  public static FileIdentity identityOrNull(Path path) {
    try {
      return identity(Files.readAttributes(path, UNIX_ATTRIBUTES, LinkOption.NOFOLLOW_LINKS));
    } catch (IOException | RuntimeException e) {
      return null;
    }
  }

  private static Opened openPlain(Path path, boolean writable) {
    OpenOption[] options =
        writable
            ? new OpenOption[] {
              StandardOpenOption.READ, StandardOpenOption.WRITE, LinkOption.NOFOLLOW_LINKS
            }
            : new OpenOption[] {StandardOpenOption.READ, LinkOption.NOFOLLOW_LINKS};
    try {
      FileChannel channel = FileChannel.open(path, options);
      try {
        Map<String, Object> after = stat(path, LinkOption.NOFOLLOW_LINKS);
        checkType(path, after);
        return new Opened(channel, identity(after));
      } catch (RuntimeException e) {
        closeQuietly(channel);
        throw e;
      }
    } catch (IOException e) {
      throw ioFailure(path, e);
    }
  }

  private static Map<String, Object> stat(Path path, LinkOption... options) {
    try {
      return Files.readAttributes(path, UNIX_ATTRIBUTES, options);
    } catch (IOException e) {
      throw ioFailure(path, e);
    } catch (UnsupportedOperationException e) {
      throw new RegionIoException(Reason.IO_ERROR, "no unix file attributes for " + path, e);
    }
  }

  private static void checkType(Path path, Map<String, Object> attributes) {
    int type = (Integer) attributes.get("mode") & S_IFMT;
    if (type == S_IFLNK) {
      throw new RegionIoException(
          Reason.SYMLINK, path + " is a symbolic link; region files are never followed", null);
    }
    if (type != S_IFREG) {
      throw new RegionIoException(
          Reason.NOT_REGULAR_FILE,
          path + " is not a regular file (mode 0" + Integer.toOctalString(type) + ")",
          null);
    }
  }

  private static FileIdentity identity(Map<String, Object> a) {
    java.time.Instant mtime = ((FileTime) a.get("lastModifiedTime")).toInstant();
    long nanos;
    try {
      nanos =
          Math.addExact(
              Math.multiplyExact(mtime.getEpochSecond(), 1_000_000_000L), mtime.getNano());
    } catch (ArithmeticException e) {
      nanos = Long.MAX_VALUE;
    }
    return new FileIdentity(
        ((Number) a.get("dev")).longValue(),
        ((Number) a.get("ino")).longValue(),
        ((Number) a.get("size")).longValue(),
        nanos);
  }

  static RegionIoException ioFailure(Path path, IOException e) {
    if (e instanceof AccessDeniedException) {
      return new RegionIoException(Reason.PERMISSION_DENIED, "no permission to open " + path, e);
    }
    if (e instanceof FileSystemLoopException) {
      return new RegionIoException(Reason.SYMLINK, path + " is a symbolic link", e);
    }
    if (e instanceof NoSuchFileException) {
      return new RegionIoException(Reason.IO_ERROR, path + " does not exist", e);
    }
    String message = e.getMessage() == null ? "" : e.getMessage();
    if (message.contains("ELOOP") || message.contains("symbolic links")) {
      return new RegionIoException(Reason.SYMLINK, path + " is a symbolic link", e);
    }
    return new RegionIoException(Reason.IO_ERROR, "cannot open " + path + ": " + e, e);
  }

  static void closeQuietly(FileChannel channel) {
    try {
      channel.close();
    } catch (IOException ignored) {
      // nothing useful to do: the channel is being abandoned
    }
  }

  /** libc {@code open}/{@code close} through the FFM linker (Linux x86_64 only). */
  private static final class Native {
    private final MethodHandle open;
    private final MethodHandle close;
    private final StructLayout callState;
    private final VarHandle errno;

    private Native(MethodHandle open, MethodHandle close, StructLayout callState) {
      this.open = open;
      this.close = close;
      this.callState = callState;
      this.errno = callState.varHandle(MemoryLayout.PathElement.groupElement("errno"));
    }

    @SuppressWarnings("restricted") // libc open/close only; see the class comment
    static Native load() {
      if (!"Linux".equals(System.getProperty("os.name"))
          || !"amd64".equals(System.getProperty("os.arch"))
          || !Files.isDirectory(Path.of("/proc/self/fd"))) {
        return null;
      }
      try {
        Linker linker = Linker.nativeLinker();
        StructLayout state = Linker.Option.captureStateLayout();
        MethodHandle open =
            linker.downcallHandle(
                linker.defaultLookup().find("open").orElseThrow(),
                FunctionDescriptor.of(
                    ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_INT),
                Linker.Option.captureCallState("errno"));
        MethodHandle close =
            linker.downcallHandle(
                linker.defaultLookup().find("close").orElseThrow(),
                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));
        return new Native(open, close, state);
      } catch (RuntimeException | LinkageError e) {
        return null; // native access unavailable: fall back to check-then-open
      }
    }

    /** Null when the native path is unusable for this file (then the caller falls back). */
    Opened open(Path path, boolean writable) {
      int flags = (writable ? O_RDWR : O_RDONLY) | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC;
      int fd;
      int err;
      try (Arena arena = Arena.ofConfined()) {
        MemorySegment state = arena.allocate(callState);
        MemorySegment cPath = arena.allocateFrom(path.toString());
        fd = (int) open.invokeExact(state, cPath, flags);
        err = (int) errno.get(state, 0L);
      } catch (Throwable t) {
        return null;
      }
      if (fd < 0) {
        Reason reason =
            switch (err) {
              case EACCES, EPERM -> Reason.PERMISSION_DENIED;
              case ELOOP -> Reason.SYMLINK;
              default -> Reason.IO_ERROR;
            };
        String what = err == ENOENT ? "does not exist" : "cannot be opened (errno " + err + ")";
        throw new RegionIoException(reason, path + " " + what, null);
      }
      try {
        Path byDescriptor = Path.of("/proc/self/fd/" + fd);
        Map<String, Object> attributes = stat(byDescriptor);
        checkType(path, attributes);
        OpenOption[] options =
            writable
                ? new OpenOption[] {StandardOpenOption.READ, StandardOpenOption.WRITE}
                : new OpenOption[] {StandardOpenOption.READ};
        FileChannel channel;
        try {
          channel = FileChannel.open(byDescriptor, options);
        } catch (IOException e) {
          throw ioFailure(path, e);
        }
        return new Opened(channel, identity(attributes));
      } finally {
        try {
          if ((int) close.invokeExact(fd) != 0) {
            CLOSE_FAILURES.incrementAndGet();
          }
        } catch (Throwable t) {
          // the descriptor leaks only if close itself fails, which it cannot for a valid fd
        }
      }
    }
  }
}
