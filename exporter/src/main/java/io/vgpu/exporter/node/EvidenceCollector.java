package io.vgpu.exporter.node;

import io.vgpu.exporter.discovery.CacheDiscovery;
import io.vgpu.exporter.discovery.ContainerKey;
import io.vgpu.exporter.discovery.MappedFaults;
import io.vgpu.exporter.discovery.SafeOpenSideFileReader;
import io.vgpu.exporter.k8s.NodeMeta;
import io.vgpu.exporter.nvml.GpuSnapshot;
import io.vgpu.exporter.nvml.NvmlSnapshot;
import io.vgpu.exporter.nvml.RunningProcess;
import io.vgpu.hostpid.ProcFs;
import io.vgpu.hostpid.ProcessInfo;
import io.vgpu.regioncodec.RegionException;
import io.vgpu.regioncodec.RegionFile;
import io.vgpu.regioncodec.RegionSnapshot;
import io.vgpu.regioncodec.SafeOpen;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.time.Duration;
import java.time.InstantSource;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Gathers {@link NodeEvidence} from the node: the cache root's regions (sampled twice, {@code
 * window} apart), every pod process's maps/environment/ld.so.preload from procfs, NVML and the node
 * annotations. Reads only; never writes a region and never takes a lock. Not thread-safe (one
 * collection at a time).
 */
public final class EvidenceCollector {
  private static final Logger LOG = LoggerFactory.getLogger(EvidenceCollector.class);

  /** Environment variables the checks read. */
  static final Set<String> ENV_KEYS =
      Set.of("CUDA_DISABLE_CONTROL", "LD_PRELOAD", "CUDA_DEVICE_MEMORY_SHARED_CACHE");

  private static final int MAX_MAPS_BYTES = 4 << 20;

  /**
   * Bytes of {@code maps} one collection reads over all pod processes: a node of tenants with huge
   * maps must not make one status-page computation read gigabytes. Processes past it are left out
   * of that collection and counted ({@link #lastUninspectedProcesses()}, one log line).
   */
  public static final long DEFAULT_MAPS_BYTES_PER_PASS = 64L << 20;

  private static final int MAX_SMALL_FILE_BYTES = 64 << 10;

  /** The pod UID of files inspected outside a {@code <podUID>_<container>} directory. */
  public static final String UNKNOWN_POD = "unknown-pod";

  /** Pauses between the two region samples; tests pass a no-op. */
  public interface Sleeper {
    void sleep(Duration d) throws InterruptedException;
  }

  private final ProcFs procFs;
  private final Supplier<NvmlSnapshot> nvml;
  private final Supplier<Optional<NodeMeta>> node;
  private final InstantSource clock;
  private final Duration window;
  private final Sleeper sleeper;
  private final NodeEvidence.Thresholds thresholds;
  private final long mapsBytesPerPass;
  private volatile int lastUninspectedProcesses;

  public EvidenceCollector(
      ProcFs procFs,
      Supplier<NvmlSnapshot> nvml,
      Supplier<Optional<NodeMeta>> node,
      InstantSource clock,
      Duration window,
      Sleeper sleeper,
      NodeEvidence.Thresholds thresholds) {
    this(procFs, nvml, node, clock, window, sleeper, thresholds, DEFAULT_MAPS_BYTES_PER_PASS);
  }

  /**
   * @param mapsBytesPerPass bytes of {@code maps} one collection reads over all processes
   */
  public EvidenceCollector(
      ProcFs procFs,
      Supplier<NvmlSnapshot> nvml,
      Supplier<Optional<NodeMeta>> node,
      InstantSource clock,
      Duration window,
      Sleeper sleeper,
      NodeEvidence.Thresholds thresholds,
      long mapsBytesPerPass) {
    this.mapsBytesPerPass = mapsBytesPerPass;
    this.procFs = procFs;
    this.nvml = nvml;
    this.node = node;
    this.clock = clock;
    this.window = window;
    this.sleeper = sleeper;
    this.thresholds = thresholds;
  }

  /**
   * Collects evidence for {@code targets}: each a cache root, a {@code <podUID>_<ctr>} directory or
   * one cache file.
   */
  public NodeEvidence collect(List<Path> targets) {
    Map<Path, List<Path>> dirs = new LinkedHashMap<>();
    for (Path t : targets) {
      containerDirs(t, dirs);
    }
    List<Open> opened = new ArrayList<>();
    List<NodeEvidence.Container> containers = new ArrayList<>();
    try {
      for (Map.Entry<Path, List<Path>> d : dirs.entrySet()) {
        String dirName =
            d.getKey().getFileName() == null ? "" : d.getKey().getFileName().toString();
        Optional<ContainerKey> key = ContainerKey.parse(dirName);
        if (key.isEmpty() && !d.getValue().isEmpty()) {
          // Files named on the command line outside a <podUID>_<container> directory (a copy
          // being examined): judged like any region, under a key that says the pod is unknown.
          key = Optional.of(new ContainerKey(UNKNOWN_POD, dirName.isEmpty() ? "-" : dirName));
        }
        if (key.isEmpty()) {
          continue;
        }
        List<Open> files = new ArrayList<>();
        for (Path f : d.getValue()) {
          Open o = Open.of(f);
          files.add(o);
          opened.add(o);
        }
        containers.add(new NodeEvidence.Container(key.get(), d.getKey(), List.of()));
        containersFiles.put(d.getKey(), files);
      }
      if (!window.isZero()) {
        try {
          sleeper.sleep(window);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
      NvmlSnapshot nv = nvml.get();
      List<NodeEvidence.Container> done = new ArrayList<>();
      for (NodeEvidence.Container c : containers) {
        List<NodeEvidence.Region> regions = new ArrayList<>();
        for (Open o : containersFiles.get(c.dir())) {
          regions.add(o.second(!window.isZero()));
        }
        done.add(
            new NodeEvidence.Container(
                c.key(),
                c.dir(),
                regions,
                CacheDiscovery.readDegraded(c.dir(), new SafeOpenSideFileReader())));
      }
      done.sort(Comparator.comparing(NodeEvidence.Container::key));
      List<NodeEvidence.PodProcess> procs = new ArrayList<>(processes(nv));
      procs.addAll(verifiedRecordedHostPids(done, procs));
      return new NodeEvidence(
          clock.instant(), window, done, procs, nv, node.get(), thresholds, lastPodsNotFullySeen);
    } finally {
      opened.forEach(Open::close);
      containersFiles.clear();
    }
  }

  private final Map<Path, List<Open>> containersFiles = new HashMap<>();

  /**
   * Slots whose process is not found through pod cgroups (no Kubernetes, or a runtime whose cgroups
   * we do not parse): the recorded host pid counts when that process lives in a nested pid
   * namespace whose innermost pid is the slot's pid (the exporter's own liveness rule). A
   * host-namespace process is never accepted this way: there pid == hostpid holds trivially, which
   * is exactly HAMi's wrong-hostpid signature.
   */
  List<NodeEvidence.PodProcess> verifiedRecordedHostPids(
      List<NodeEvidence.Container> containers, List<NodeEvidence.PodProcess> known) {
    List<NodeEvidence.PodProcess> out = new ArrayList<>();
    for (NodeEvidence.Container c : containers) {
      for (NodeEvidence.Region r : c.regions()) {
        if (r.latest().isEmpty() || r.inode() < 0) {
          continue;
        }
        for (var slot : r.latest().get().processes()) {
          boolean matched =
              known.stream()
                  .anyMatch(
                      p ->
                          p.podUid().equals(c.key().podUid())
                              && p.maps(r)
                              && p.containerPid() == slot.pid());
          if (matched || slot.hostPid() <= 0) {
            continue;
          }
          Optional<ProcessInfo> info = procFs.readProcess(slot.hostPid());
          if (info.isEmpty()
              || info.get().nsPids().size() < 2
              || info.get().innermostPid() != slot.pid()) {
            continue;
          }
          if (info.get().cgroup().podUid().isPresent()
              && !info.get().cgroup().podUid().get().equals(c.key().podUid())) {
            continue; // another pod's process: never attribute across pods
          }
          out.add(
              new NodeEvidence.PodProcess(
                  slot.hostPid(),
                  info.get().startTimeTicks(),
                  slot.pid(),
                  c.key().podUid(),
                  info.get().cgroup().containerId(),
                  List.of(),
                  Set.of(r.inode()),
                  false,
                  preload(procFs.path(slot.hostPid(), "root")),
                  Map.of()));
        }
      }
    }
    return out;
  }

  /** Resolves a target to container directories and their cache files. */
  static void containerDirs(Path target, Map<Path, List<Path>> out) {
    if (Files.isRegularFile(target, LinkOption.NOFOLLOW_LINKS)) {
      out.computeIfAbsent(target.toAbsolutePath().getParent(), k -> new ArrayList<>())
          .add(target.toAbsolutePath());
      return;
    }
    if (!Files.isDirectory(target, LinkOption.NOFOLLOW_LINKS)) {
      return;
    }
    if (ContainerKey.parse(target.getFileName() == null ? "" : target.getFileName().toString())
        .isPresent()) {
      out.computeIfAbsent(target.toAbsolutePath(), k -> new ArrayList<>())
          .addAll(cacheFiles(target));
      return;
    }
    TreeSet<Path> children = new TreeSet<>();
    try (DirectoryStream<Path> ds = Files.newDirectoryStream(target)) {
      for (Path p : ds) {
        if (Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS)
            && ContainerKey.parse(p.getFileName().toString()).isPresent()) {
          children.add(p);
        }
      }
    } catch (IOException e) {
      return;
    }
    for (Path p : children) {
      out.computeIfAbsent(p.toAbsolutePath(), k -> new ArrayList<>()).addAll(cacheFiles(p));
    }
  }

  private static List<Path> cacheFiles(Path dir) {
    TreeSet<Path> files = new TreeSet<>();
    try (DirectoryStream<Path> ds = Files.newDirectoryStream(dir, "*.cache")) {
      for (Path p : ds) {
        files.add(p.toAbsolutePath());
      }
    } catch (IOException e) {
      return List.of();
    }
    return List.copyOf(files);
  }

  /** One cache file kept open between the two samples. */
  private static final class Open {
    final Path path;
    long inode = -1;
    long device = -1;
    RegionFile file;
    Optional<RegionSnapshot> first = Optional.empty();
    Optional<String> error = Optional.empty();
    int semaphoreFirst = -1;

    private Open(Path path) {
      this.path = path;
    }

    /**
     * Opens through region-codec's safe open; inode and device come from that descriptor, so the
     * file every later verdict (and {@code --expect-inode}) refers to is the one that was read.
     */
    static Open of(Path path) {
      Open o = new Open(path);
      try {
        o.file = RegionFile.openReadOnly(path);
        o.inode = o.file.identity().inode();
        o.device = o.file.identity().device();
        RegionSnapshot s = o.file.snapshot();
        MappedFaults.deliverPending();
        o.first = Optional.of(s);
        o.semaphoreFirst = o.file.semaphoreValue();
        MappedFaults.deliverPending();
      } catch (RegionException e) {
        o.error =
            Optional.of(
                e.getCause() instanceof InternalError && !o.file.changedOnDisk()
                    ? FAULTED
                    : e.reason().name().toLowerCase(java.util.Locale.ROOT) + ": " + e.getMessage());
      } catch (InternalError e) {
        o.error = Optional.of(FAULTED);
      } catch (RuntimeException e) {
        // A hostile file must cost one region, never the whole report.
        o.error = Optional.of("unreadable: " + e);
      }
      return o;
    }

    /** A load faulted (SIGBUS) on a file that kept its size. */
    static final String FAULTED =
        "io_error: reading the mapping faulted although the file kept its size (a page the"
            + " filesystem cannot provide: a hole of a sparse file on a full tmpfs?)";

    NodeEvidence.Region second(boolean resample) {
      Optional<RegionSnapshot> second = first;
      int semaphoreSecond = semaphoreFirst;
      if (resample && file != null) {
        try {
          RegionSnapshot s = file.snapshot();
          MappedFaults.deliverPending();
          second = Optional.of(s);
          semaphoreSecond = file.semaphoreValue();
          MappedFaults.deliverPending();
        } catch (RuntimeException | InternalError e) {
          second = Optional.empty();
          semaphoreSecond = -1;
        }
      }
      return new NodeEvidence.Region(
          path, inode, device, first, second, error, semaphoreFirst, semaphoreSecond);
    }

    void close() {
      if (file != null) {
        file.close();
      }
    }
  }

  /** Every pod process that uses the GPU, maps libvgpu or maps a region. */
  List<NodeEvidence.PodProcess> processes(NvmlSnapshot nv) {
    Set<Integer> nvmlPids = new HashSet<>();
    for (GpuSnapshot g : nv.gpus()) {
      g.processes().ifPresent(ps -> ps.stream().map(RunningProcess::pid).forEach(nvmlPids::add));
    }
    List<NodeEvidence.PodProcess> out = new ArrayList<>();
    long budget = mapsBytesPerPass;
    int uninspected = 0;
    Set<String> notFullySeen = new HashSet<>();
    for (int pid : procFs.listPids()) {
      Optional<ProcessInfo> info = procFs.readProcess(pid);
      if (info.isEmpty() || info.get().cgroup().podUid().isEmpty()) {
        continue;
      }
      if (budget <= 0) {
        uninspected++;
        notFullySeen.add(info.get().cgroup().podUid().get());
        continue;
      }
      Maps maps = readMaps(procFs.path(pid, "maps"), (int) Math.min(MAX_MAPS_BYTES, budget));
      budget -= maps.bytesRead();
      if (!maps.readable()) {
        notFullySeen.add(info.get().cgroup().podUid().get());
      }
      boolean gpu = maps.gpu || nvmlPids.contains(pid);
      if (!gpu && maps.vgpu.isEmpty() && maps.cacheInodes.isEmpty()) {
        continue;
      }
      ProcessInfo p = info.get();
      out.add(
          new NodeEvidence.PodProcess(
              pid,
              p.startTimeTicks(),
              p.innermostPid(),
              p.cgroup().podUid().get(),
              p.cgroup().containerId(),
              maps.vgpu,
              maps.cacheInodes,
              gpu,
              preload(procFs.path(pid, "root")),
              environment(procFs.path(pid, "environ"))));
    }
    lastUninspectedProcesses = uninspected;
    lastPodsNotFullySeen = Set.copyOf(notFullySeen);
    if (uninspected > 0) {
      LOG.atWarn()
          .addKeyValue("uninspected_processes", uninspected)
          .addKeyValue("maps_bytes_per_pass", mapsBytesPerPass)
          .log("pod processes left out of this evidence pass: the maps read budget was spent");
    }
    return out;
  }

  /** Pod processes the last collection left out because its maps budget was spent. */
  public int lastUninspectedProcesses() {
    return lastUninspectedProcesses;
  }

  /** Pods of the last collection with a process whose maps were unreadable or left out. */
  private volatile Set<String> lastPodsNotFullySeen = Set.of();

  record Maps(
      List<String> vgpu, Set<Long> cacheInodes, boolean gpu, int bytesRead, boolean readable) {}

  /** Parses {@code maps}: "addr perms offset dev inode path". */
  static Maps readMaps(Path maps) {
    return readMaps(maps, MAX_MAPS_BYTES);
  }

  static Maps readMaps(Path maps, int maxBytes) {
    Optional<byte[]> text = readBytes(maps, maxBytes);
    TreeSet<String> vgpu = new TreeSet<>();
    Set<Long> inodes = new HashSet<>();
    boolean gpu = false;
    if (text.isPresent()) {
      byte[] all = text.get();
      for (int start = 0; start < all.length; ) {
        int end = start;
        while (end < all.length && all[end] != '\n') {
          end++;
        }
        // Most of a CUDA process's maps (thousands of library and anonymous lines) cannot match:
        // only lines whose path's last element names one of these are split into fields. That
        // element lies after the line's last '/' (or is the line, without one), so only that
        // tail is searched, byte by byte: a pass over 400 processes with 100 KB of maps each
        // took ~0.4 s of CPU under C1 with String searches of whole lines.
        int tail = end;
        while (tail > start && all[tail - 1] != '/') {
          tail--;
        }
        String line =
            candidate(all, tail, end)
                ? new String(all, start, end - start, StandardCharsets.ISO_8859_1)
                : null;
        start = end + 1;
        if (line == null) {
          continue;
        }
        String[] f = line.trim().split("\\s+", 6);
        if (f.length < 6) {
          continue;
        }
        String path = f[5];
        String name = path.substring(path.lastIndexOf('/') + 1);
        if (name.contains("libvgpu")) {
          vgpu.add(path + " (" + f[3] + ":" + f[4] + ")");
        } else if (name.startsWith("libcuda.so") || name.startsWith("libnvidia-ml.so")) {
          gpu = true;
        } else if (name.endsWith(".cache")) {
          try {
            inodes.add(Long.parseLong(f[4]));
          } catch (NumberFormatException e) {
            // not a maps line we understand
          }
        }
      }
    }
    return new Maps(
        List.copyOf(vgpu), inodes, gpu, text.map(b -> b.length).orElse(0), text.isPresent());
  }

  private static final byte[] LIBVGPU = ascii("libvgpu");
  private static final byte[] LIBCUDA = ascii("libcuda.so");
  private static final byte[] LIBNVML = ascii("libnvidia-ml.so");
  private static final byte[] CACHE = ascii(".cache");

  private static byte[] ascii(String s) {
    return s.getBytes(StandardCharsets.US_ASCII);
  }

  /** Whether {@code b[from, to)} holds one of the names a line is split for. */
  private static boolean candidate(byte[] b, int from, int to) {
    for (int i = from; i < to; i++) {
      byte c = b[i];
      if (c == 'l') {
        if (at(b, i, to, LIBVGPU) || at(b, i, to, LIBCUDA) || at(b, i, to, LIBNVML)) {
          return true;
        }
      } else if (c == '.' && at(b, i, to, CACHE)) {
        return true;
      }
    }
    return false;
  }

  /** Whether {@code what} starts at {@code b[i]} and ends by {@code to}. */
  private static boolean at(byte[] b, int i, int to, byte[] what) {
    if (to - i < what.length) {
      return false;
    }
    for (int k = 1; k < what.length; k++) {
      if (b[i + k] != what[k]) {
        return false;
      }
    }
    return true;
  }

  static Map<String, String> environment(Path environ) {
    Map<String, String> env = new HashMap<>();
    read(environ, MAX_SMALL_FILE_BYTES)
        .ifPresent(
            text -> {
              for (String kv : text.split("\0", -1)) {
                int eq = kv.indexOf('=');
                if (eq > 0 && ENV_KEYS.contains(kv.substring(0, eq))) {
                  env.put(kv.substring(0, eq), kv.substring(eq + 1));
                }
              }
            });
    return env;
  }

  /**
   * What {@code etc/ld.so.preload} below a container's root says about libvgpu. The file is the
   * tenant's: opened through {@link SafeOpen} rooted at {@code /proc/<pid>/root} (no link followed,
   * so an absolute link cannot reach the exporter's own files; a FIFO is never opened), and only
   * the fact leaves this method, never the content.
   */
  static NodeEvidence.Preload preload(Path containerRoot) {
    SafeOpen.Small s =
        SafeOpen.readSmall(containerRoot, Path.of("etc", "ld.so.preload"), MAX_SMALL_FILE_BYTES);
    if (s.why() == SafeOpen.Unread.MISSING) {
      return NodeEvidence.Preload.MISSING;
    }
    if (!s.read()) {
      return NodeEvidence.Preload.UNREADABLE;
    }
    return new String(s.bytes(), StandardCharsets.ISO_8859_1).contains("libvgpu.so")
        ? NodeEvidence.Preload.NAMES_LIBVGPU
        : NodeEvidence.Preload.DOES_NOT_NAME_LIBVGPU;
  }

  /** Reads at most {@code max} bytes; empty when missing or unreadable (never blocks on a FIFO). */
  private static Optional<String> read(Path p, int max) {
    return readBytes(p, max).map(b -> new String(b, StandardCharsets.ISO_8859_1));
  }

  private static Optional<byte[]> readBytes(Path p, int max) {
    try {
      if (!Files.isRegularFile(p)) {
        return Optional.empty();
      }
      try (InputStream in = Files.newInputStream(p)) {
        return Optional.of(in.readNBytes(max));
      }
    } catch (IOException | SecurityException e) {
      return Optional.empty();
    }
  }
}
