package io.vgpu.regioncodec.internal;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The few Linux calls a safe open needs, through the FFM linker: {@code openat}, {@code close} and
 * {@code openat2} (through libc's {@code syscall}, which glibc does not wrap). Nothing here depends
 * on a struct layout that differs between architectures ({@code struct open_how} is three u64 on
 * every one); what does differ, the {@code O_*} flag values, is chosen by architecture and then
 * confirmed against the running kernel (a table that does not behave is never used).
 *
 * <p>System properties, for tests and for a kernel that misbehaves:
 *
 * <ul>
 *   <li>{@code vgpu.safe-open.resolver=walk}: never use {@code openat2}; resolve one component at a
 *       time with {@code O_NOFOLLOW} (what a kernel older than 5.6, or a seccomp profile that
 *       refuses {@code openat2}, gets anyway).
 *   <li>{@code vgpu.safe-open.arch} (default {@code os.arch}): which flag table is tried first; the
 *       kernel then confirms or refuses it. Lets a test on x86_64 take the path an aarch64 or
 *       powerpc JVM takes (its table refused by this kernel, the generic one confirmed). Setting
 *       {@code os.arch} itself would also switch the FFM linker's calling convention.
 * </ul>
 */
public final class NativeFs {
  /** How names below the trusted directory are resolved. */
  public enum Resolver {
    /** {@code openat2} with {@code RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | NO_MAGICLINKS}. */
    OPENAT2,
    /** One {@code openat(O_NOFOLLOW)} per component; {@code ..} refused. */
    WALK
  }

  /**
   * The {@code O_*} values that differ between architectures.
   *
   * @param name which family (for logs)
   * @param directory {@code O_DIRECTORY}
   * @param noFollow {@code O_NOFOLLOW}
   */
  record Flags(String name, int directory, int noFollow) {}

  /** x86_64, riscv64, s390x, loongarch64: asm-generic/fcntl.h. */
  static final Flags GENERIC = new Flags("generic", 0200000, 0400000);

  /** aarch64, arm, powerpc: their asm/fcntl.h swap O_DIRECTORY/O_NOFOLLOW with O_DIRECT etc. */
  static final Flags ARM_PPC = new Flags("arm-ppc", 040000, 0100000);

  // The same on every architecture this table covers.
  /** close(2) failures on descriptors this package opened (diagnostics only; never expected). */
  static final java.util.concurrent.atomic.AtomicLong CLOSE_FAILURES =
      new java.util.concurrent.atomic.AtomicLong();

  static final int O_RDONLY = 0;
  static final int O_RDWR = 2;
  static final int O_CLOEXEC = 02000000;
  static final int O_PATH = 010000000;
  static final int AT_FDCWD = -100;

  static final long RESOLVE_NO_XDEV = 0x01;
  static final long RESOLVE_NO_MAGICLINKS = 0x02;
  static final long RESOLVE_NO_SYMLINKS = 0x04;
  static final long RESOLVE_IN_ROOT = 0x10;

  /** openat2's number in the unified syscall table (x86_64, aarch64, riscv64, ppc64, s390x). */
  static final long SYS_OPENAT2 = 437;

  static final int EPERM = 1;
  static final int ENOENT = 2;
  static final int EACCES = 13;
  static final int ENOTDIR = 20;
  static final int ELOOP = 40;
  static final int EXDEV = 18;

  /** The failure of one call. */
  public static final class Errno extends Exception {
    private static final long serialVersionUID = 1L;
    public final int errno;

    Errno(int errno, String what) {
      super(what + " failed (errno " + errno + ")");
      this.errno = errno;
    }

    public boolean symlink() {
      return errno == ELOOP || errno == EXDEV;
    }

    /** EXDEV: with {@code RESOLVE_NO_XDEV}, the path crossed a mount point (or left the root). */
    public boolean crossDevice() {
      return errno == EXDEV;
    }

    public boolean missing() {
      return errno == ENOENT;
    }

    public boolean denied() {
      return errno == EACCES || errno == EPERM;
    }

    public boolean notDirectory() {
      return errno == ENOTDIR;
    }
  }

  private static final NativeFs INSTANCE = load();

  private final MethodHandle openat;
  private final MethodHandle close;
  private final MethodHandle syscall4;
  private final StructLayout callState;
  private final VarHandle errnoHandle;
  private Flags flags;
  private Resolver resolver;
  private final List<String> refused = new ArrayList<>();

  private NativeFs(MethodHandle openat, MethodHandle close, MethodHandle syscall4) {
    this.openat = openat;
    this.close = close;
    this.syscall4 = syscall4;
    this.callState = Linker.Option.captureStateLayout();
    this.errnoHandle = callState.varHandle(MemoryLayout.PathElement.groupElement("errno"));
  }

  /** The loaded instance, or null when no flag table matches this kernel (then nothing opens). */
  public static NativeFs get() {
    return INSTANCE;
  }

  public Resolver resolver() {
    return resolver;
  }

  /** Which flag family the kernel confirmed, and any it refused first. */
  public String flagFamily() {
    return flags.name()
        + (refused.isEmpty() ? "" : " (refused: " + String.join(",", refused) + ")");
  }

  @SuppressWarnings("restricted") // libc openat/close/syscall only; see the class comment
  private static NativeFs load() {
    if (!"Linux".equals(System.getProperty("os.name"))) {
      return null;
    }
    NativeFs fs;
    try {
      Linker linker = Linker.nativeLinker();
      var lookup = linker.defaultLookup();
      Linker.Option errno = Linker.Option.captureCallState("errno");
      MethodHandle openat =
          linker.downcallHandle(
              lookup.find("openat").orElseThrow(),
              FunctionDescriptor.of(
                  ValueLayout.JAVA_INT,
                  ValueLayout.JAVA_INT,
                  ValueLayout.ADDRESS,
                  ValueLayout.JAVA_INT),
              errno);
      MethodHandle close =
          linker.downcallHandle(
              lookup.find("close").orElseThrow(),
              FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));
      // long syscall(long number, ...): every variadic argument passed as a full long.
      MethodHandle syscall =
          linker.downcallHandle(
              lookup.find("syscall").orElseThrow(),
              FunctionDescriptor.of(
                  ValueLayout.JAVA_LONG,
                  ValueLayout.JAVA_LONG,
                  ValueLayout.JAVA_LONG,
                  ValueLayout.ADDRESS,
                  ValueLayout.ADDRESS,
                  ValueLayout.JAVA_LONG),
              Linker.Option.firstVariadicArg(1),
              errno);
      fs = new NativeFs(openat, close, syscall);
    } catch (RuntimeException | LinkageError e) {
      return null;
    }
    String arch = System.getProperty("vgpu.safe-open.arch", System.getProperty("os.arch", ""));
    for (Flags candidate : candidates(arch)) {
      if (fs.confirm(candidate)) {
        fs.flags = candidate;
        break;
      }
      fs.refused.add(candidate.name());
    }
    if (fs.flags == null) {
      return null;
    }
    boolean walkOnly = "walk".equals(System.getProperty("vgpu.safe-open.resolver"));
    fs.resolver = !walkOnly && fs.openat2Works() ? Resolver.OPENAT2 : Resolver.WALK;
    return fs;
  }

  /** The architecture's own table first, then the other (confirmation decides). */
  static List<Flags> candidates(String arch) {
    String a = arch.toLowerCase(Locale.ROOT);
    boolean armOrPpc = a.startsWith("aarch64") || a.startsWith("arm") || a.startsWith("ppc");
    List<Flags> out = new ArrayList<>();
    out.add(armOrPpc ? ARM_PPC : GENERIC);
    out.add(armOrPpc ? GENERIC : ARM_PPC);
    return out;
  }

  /**
   * Whether {@code f} means on this kernel what we think: {@code O_NOFOLLOW} must refuse the magic
   * link {@code /proc/self/cwd} (a wrong value is {@code O_LARGEFILE} or {@code O_DIRECT} there and
   * the open succeeds) and {@code O_DIRECTORY} must refuse the regular file {@code
   * /proc/self/status}. Not {@code /proc/self/exe} or {@code /proc/self/stat}: qemu-user answers
   * opens of those two itself (the guest's program, a made-up stat) whatever the flags, so under
   * emulation, the only way an aarch64 JVM runs here, no table would ever be confirmed.
   */
  private boolean confirm(Flags f) {
    try {
      int fd = rawOpenat(AT_FDCWD, "/proc/self/cwd", O_RDONLY | O_CLOEXEC | f.noFollow());
      closeQuietly(fd);
      return false;
    } catch (Errno e) {
      if (e.errno != ELOOP) {
        return false;
      }
    }
    try {
      int fd = rawOpenat(AT_FDCWD, "/proc/self/status", O_RDONLY | O_CLOEXEC | f.directory());
      closeQuietly(fd);
      return false;
    } catch (Errno e) {
      return e.errno == ENOTDIR;
    }
  }

  private boolean openat2Works() {
    try {
      int fd = openat2(AT_FDCWD, "/", O_PATH | O_CLOEXEC | flags.directory(), RESOLVE_NO_SYMLINKS);
      closeQuietly(fd);
      return true;
    } catch (Errno e) {
      return false; // ENOSYS (kernel < 5.6) or a seccomp profile that refuses it
    }
  }

  /** An {@code O_PATH} descriptor of a trusted directory (links in its path are followed). */
  public int openTrustedDirectory(String path) throws Errno {
    return rawOpenat(AT_FDCWD, path, O_PATH | O_CLOEXEC | flags.directory());
  }

  /**
   * An {@code O_PATH} descriptor of {@code components} below {@code dirFd}, reached without
   * following any symbolic link (a trailing link yields a descriptor of the link itself, which the
   * caller's type check refuses). Never blocks: {@code O_PATH} does not open the file for I/O, so a
   * FIFO or device is never really opened.
   */
  public int openBeneath(int dirFd, List<String> components) throws Errno {
    return openBeneath(dirFd, components, false);
  }

  /**
   * Like {@link #openBeneath(int, List)}; with {@code sameMount}, {@code openat2} also refuses to
   * cross a mount point ({@code RESOLVE_NO_XDEV}, EXDEV): a file below a tenant's container root is
   * then read only from that root's own filesystem, never from one the tenant mounted there (FUSE,
   * NFS) whose reads it can stall. The walk resolver cannot refuse the crossing; its caller
   * compares the result's device with the directory's.
   */
  public int openBeneath(int dirFd, List<String> components, boolean sameMount) throws Errno {
    for (String c : components) {
      if (c.equals("..") || c.isEmpty() || c.equals(".") || c.indexOf('/') >= 0) {
        throw new IllegalArgumentException("not a plain name component: " + c);
      }
    }
    if (components.isEmpty()) {
      throw new IllegalArgumentException("no name below the trusted directory");
    }
    // No O_NONBLOCK: openat2 refuses it next to O_PATH, and O_PATH never blocks anyway.
    int leafFlags = O_PATH | O_CLOEXEC | flags.noFollow();
    if (resolver == Resolver.OPENAT2) {
      return openat2(
          dirFd,
          String.join("/", components),
          leafFlags,
          RESOLVE_IN_ROOT
              | RESOLVE_NO_SYMLINKS
              | RESOLVE_NO_MAGICLINKS
              | (sameMount ? RESOLVE_NO_XDEV : 0));
    }
    int current = dirFd;
    try {
      for (int i = 0; i < components.size() - 1; i++) {
        int next =
            rawOpenat(
                current,
                components.get(i),
                O_PATH | O_CLOEXEC | flags.directory() | flags.noFollow());
        if (current != dirFd) {
          closeQuietly(current);
        }
        current = next;
      }
      return rawOpenat(current, components.getLast(), leafFlags);
    } finally {
      if (current != dirFd) {
        closeQuietly(current);
      }
    }
  }

  /**
   * A file time as epoch nanoseconds, saturated at {@code Long.MAX_VALUE} (a forged far future).
   */
  public static long epochNanos(java.nio.file.attribute.FileTime time) {
    java.time.Instant t = time.toInstant();
    try {
      return Math.addExact(Math.multiplyExact(t.getEpochSecond(), 1_000_000_000L), t.getNano());
    } catch (ArithmeticException e) {
      return Long.MAX_VALUE;
    }
  }

  public void closeQuietly(int fd) {
    try {
      int rc = (int) close.invokeExact(fd);
      if (rc != 0) {
        CLOSE_FAILURES.incrementAndGet();
      }
    } catch (Throwable t) {
      CLOSE_FAILURES.incrementAndGet();
    }
  }

  private int rawOpenat(int dirFd, String path, int openFlags) throws Errno {
    int fd;
    int err;
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(callState);
      MemorySegment cPath = arena.allocateFrom(path);
      fd = (int) openat.invokeExact(state, dirFd, cPath, openFlags);
      err = (int) errnoHandle.get(state, 0L);
    } catch (Throwable t) {
      throw new IllegalStateException("openat could not be called", t);
    }
    if (fd < 0) {
      throw new Errno(err, "openat");
    }
    return fd;
  }

  private int openat2(int dirFd, String path, int openFlags, long resolve) throws Errno {
    long rc;
    int err;
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(callState);
      MemorySegment cPath = arena.allocateFrom(path);
      // struct open_how { u64 flags; u64 mode; u64 resolve; }: the same on every architecture.
      MemorySegment how = arena.allocate(24, 8);
      how.set(ValueLayout.JAVA_LONG, 0, Integer.toUnsignedLong(openFlags));
      how.set(ValueLayout.JAVA_LONG, 8, 0L);
      how.set(ValueLayout.JAVA_LONG, 16, resolve);
      rc = (long) syscall4.invokeExact(state, SYS_OPENAT2, (long) dirFd, cPath, how, 24L);
      err = (int) errnoHandle.get(state, 0L);
    } catch (Throwable t) {
      throw new IllegalStateException("openat2 could not be called", t);
    }
    if (rc < 0) {
      throw new Errno(err, "openat2");
    }
    return (int) rc;
  }
}
