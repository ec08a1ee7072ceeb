package io.vgpu.hostpid;

import io.vgpu.hostpid.internal.BoundedReader;
import io.vgpu.hostpid.internal.CgroupParser;
import io.vgpu.hostpid.internal.EnvironParser;
import io.vgpu.hostpid.internal.MapsParser;
import io.vgpu.hostpid.internal.StatParser;
import io.vgpu.hostpid.internal.StatParser.Stat;
import io.vgpu.hostpid.internal.StatusParser;
import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Set;

/**
 * Reads processes from a procfs tree: the only class that builds {@code /proc} paths, and the one
 * reader of its files ({@code stat}, {@code status}, {@code cgroup}, and the bounded facts of
 * {@code maps} and {@code environ}).
 *
 * <p>The root is the host's {@code /proc} in production (the exporter runs with {@code hostPID}), a
 * host {@code /proc} mounted elsewhere, or a fixture directory in tests. Every file is read whole
 * but at most {@link #MAX_FILE_BYTES} bytes, as bytes (non-UTF-8 is fine). When the root is not the
 * kernel's procfs, each file is also checked to be a regular file before it is opened, so a planted
 * FIFO cannot block a scan.
 *
 * <p>Thread-safe and stateless apart from per-thread read buffers.
 */
public final class ProcFs {

  /** The host's procfs, where the exporter (hostPID: true) sees every process. */
  public static final Path DEFAULT_ROOT = Path.of("/proc");

  /**
   * The most bytes read from one file. Real {@code status} files are about 1.5 KiB and {@code
   * cgroup} a few hundred bytes per hierarchy; 64 KiB leaves room for long paths and refuses junk.
   */
  public static final int MAX_FILE_BYTES = 64 * 1024;

  private final Path root;
  private final BoundedReader reader;

  /**
   * A procfs rooted at {@code root}; nothing is read until asked. Unless the root is the kernel's
   * procfs, each file is checked to be a regular file before it is opened.
   */
  public ProcFs(Path root) {
    this(root, !isKernelProcfs(root));
  }

  private ProcFs(Path root, boolean checkFileTypes) {
    if (root == null) {
      throw new IllegalArgumentException("root must not be null");
    }
    this.root = root;
    this.reader = new BoundedReader(MAX_FILE_BYTES, checkFileTypes);
  }

  /**
   * A tree that only its creator can write (generated fixtures, benchmarks): files are opened
   * without the regular-file check, as for the kernel's procfs. A FIFO planted in such a tree would
   * block a read, so never use this for a directory others can write.
   */
  public static ProcFs trustedTree(Path root) {
    return new ProcFs(root, false);
  }

  /** The host's procfs at {@link #DEFAULT_ROOT}. */
  public static ProcFs host() {
    return new ProcFs(DEFAULT_ROOT);
  }

  public Path root() {
    return root;
  }

  /** {@code <root>/<pid>/<file>}. */
  public Path path(int pid, String file) {
    return root.resolve(Integer.toString(pid)).resolve(file);
  }

  /**
   * The pids listed in the root (numeric entries only), ascending.
   *
   * @throws ProcFsUnavailableException when the root cannot be listed at all
   */
  public int[] listPids() {
    int[] pids = new int[1024];
    int count = 0;
    try (DirectoryStream<Path> entries = Files.newDirectoryStream(root)) {
      for (Path entry : entries) {
        int pid = parsePid(entry.getFileName().toString());
        if (pid > 0) {
          if (count == pids.length) {
            pids = Arrays.copyOf(pids, count * 2);
          }
          pids[count++] = pid;
        }
      }
    } catch (IOException | RuntimeException e) {
      throw new ProcFsUnavailableException(root, e);
    }
    int[] result = Arrays.copyOf(pids, count);
    Arrays.sort(result);
    return result;
  }

  /**
   * The start time of a live (not zombie) process, from one read of its {@code stat}; empty when it
   * is gone, a zombie, or its stat is unusable.
   */
  public OptionalLong startTimeTicks(int pid) {
    StatRead stat = readStat(pid);
    return stat.stat() != null && !stat.stat().exited()
        ? OptionalLong.of(stat.stat().startTimeTicks())
        : OptionalLong.empty();
  }

  /** Reads one process: its stat, status and cgroup, consistently. Never throws. */
  public ProcessRead read(int pid) {
    if (pid <= 0) {
      return new ProcessRead.Gone(Math.max(pid, 0));
    }
    StatRead stat = readStat(pid);
    if (stat.problem() != null) {
      return stat.problem();
    }
    return readIfStartedAt(pid, stat.stat().startTimeTicks());
  }

  /** {@link #read} as an optional: present only for {@link ProcessRead.Found}. */
  public Optional<ProcessInfo> readProcess(int pid) {
    return read(pid) instanceof ProcessRead.Found found
        ? Optional.of(found.process())
        : Optional.empty();
  }

  /**
   * Reads status and cgroup of the process that has start time {@code startTimeTicks}, then reads
   * stat again: if the pid now belongs to another process (or none), the result is {@link
   * ProcessRead.Gone}, never a mix of two processes' facts. Never throws.
   */
  public ProcessRead readIfStartedAt(int pid, long startTimeTicks) {
    if (pid <= 0) {
      return new ProcessRead.Gone(Math.max(pid, 0));
    }
    BoundedReader.Result status = reader.read(path(pid, "status"));
    if (status.outcome() != BoundedReader.Outcome.OK) {
      return failure(pid, status, ProcessRead.Problem.MALFORMED_STATUS);
    }
    BoundedReader.Result cgroup = reader.read(path(pid, "cgroup"));
    if (cgroup.outcome() != BoundedReader.Outcome.OK) {
      return failure(pid, cgroup, ProcessRead.Problem.UNREADABLE);
    }
    StatRead after = readStat(pid);
    if (after.problem() != null) {
      return after.problem();
    }
    if (after.stat().startTimeTicks() != startTimeTicks) {
      return new ProcessRead.Gone(pid); // exited and the pid was reused while we read
    }
    int[] nsPids = StatusParser.parseNsPids(status.text());
    if (nsPids == null || nsPids[0] != pid) {
      return new ProcessRead.Unusable(pid, ProcessRead.Problem.MALFORMED_STATUS);
    }
    return new ProcessRead.Found(
        new ProcessInfo(
            pid,
            startTimeTicks,
            Arrays.stream(nsPids).boxed().toList(),
            CgroupParser.parse(cgroup.text())));
  }

  /**
   * The user ids of the process ({@code Uid:} of {@code <root>/<pid>/status}: real, effective,
   * saved, file-system); empty when it is gone or the line is unusable. Never throws.
   */
  public Set<Integer> readUids(int pid) {
    if (pid <= 0) {
      return Set.of();
    }
    BoundedReader.Result status = reader.read(path(pid, "status"));
    int[] ids =
        status.outcome() == BoundedReader.Outcome.OK ? StatusParser.parseUids(status.text()) : null;
    if (ids == null) {
      return Set.of();
    }
    java.util.TreeSet<Integer> out = new java.util.TreeSet<>();
    for (int id : ids) {
      out.add(id);
    }
    return java.util.Collections.unmodifiableSet(out);
  }

  /**
   * The facts of {@code <root>/<pid>/maps} that tell GPU use under a vGPU limit, reading at most
   * {@code maxBytes} (the caller's budget). A read that stopped at the bound is not {@link
   * ProcessMaps#complete complete}. Never throws; never blocks on a FIFO.
   */
  public ProcessMaps readMaps(int pid, int maxBytes) {
    return MapsParser.read(path(pid, "maps"), maxBytes);
  }

  /**
   * The variables named in {@code keys} from {@code <root>/<pid>/environ} (the process's own bytes,
   * read up to {@link #MAX_FILE_BYTES}); empty when the file is gone or unreadable. Never throws.
   */
  public Map<String, String> readEnviron(int pid, Set<String> keys) {
    return EnvironParser.read(path(pid, "environ"), MAX_FILE_BYTES, keys);
  }

  /** Whether the process with this pid is alive and still the one that started then. */
  boolean isAlive(int pid, long startTimeTicks) {
    OptionalLong start = startTimeTicks(pid);
    return start.isPresent() && start.getAsLong() == startTimeTicks;
  }

  /** A stat read: exactly one of {@code stat} (live or exited) and {@code problem} is set. */
  record StatRead(Stat stat, ProcessRead problem) {}

  StatRead readStat(int pid) {
    if (pid <= 0) {
      return new StatRead(null, new ProcessRead.Gone(Math.max(pid, 0)));
    }
    BoundedReader.Result result = reader.read(path(pid, "stat"));
    if (result.outcome() != BoundedReader.Outcome.OK) {
      return new StatRead(null, failure(pid, result, ProcessRead.Problem.MALFORMED_STAT));
    }
    Stat stat = StatParser.parse(result.text());
    if (stat == null || stat.pid() != pid) {
      return new StatRead(null, new ProcessRead.Unusable(pid, ProcessRead.Problem.MALFORMED_STAT));
    }
    if (stat.exited()) {
      return new StatRead(null, new ProcessRead.Gone(pid));
    }
    return new StatRead(stat, null);
  }

  private static ProcessRead failure(
      int pid, BoundedReader.Result result, ProcessRead.Problem malformed) {
    return switch (result.outcome()) {
      case GONE -> new ProcessRead.Gone(pid);
      case TOO_LARGE -> new ProcessRead.Unusable(pid, ProcessRead.Problem.TOO_LARGE);
      case UNREADABLE -> new ProcessRead.Unusable(pid, ProcessRead.Problem.UNREADABLE);
      case OK -> new ProcessRead.Unusable(pid, malformed);
    };
  }

  /** A positive decimal that fits an int, without leading zeros; else -1. */
  private static int parsePid(String name) {
    int length = name.length();
    if (length == 0 || length > 10 || name.charAt(0) == '0') {
      return -1;
    }
    long value = 0;
    for (int i = 0; i < length; i++) {
      char c = name.charAt(i);
      if (c < '0' || c > '9') {
        return -1;
      }
      value = value * 10 + (c - '0');
    }
    return value <= Integer.MAX_VALUE ? (int) value : -1;
  }

  private static boolean isKernelProcfs(Path root) {
    try {
      return Files.getFileStore(root).type().equals("proc");
    } catch (IOException | RuntimeException e) {
      return false;
    }
  }

  @Override
  public String toString() {
    return "ProcFs[" + root + "]";
  }
}
