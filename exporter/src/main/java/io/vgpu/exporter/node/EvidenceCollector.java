package io.vgpu.exporter.node;

import io.vgpu.exporter.discovery.CacheDiscovery;
import io.vgpu.exporter.discovery.ContainerKey;
import io.vgpu.exporter.discovery.ContainerTargets;
import io.vgpu.exporter.discovery.SafeOpenSideFileReader;
import io.vgpu.exporter.k8s.NodeMeta;
import io.vgpu.exporter.nvml.GpuSnapshot;
import io.vgpu.exporter.nvml.NvmlSnapshot;
import io.vgpu.exporter.nvml.RunningProcess;
import io.vgpu.hostpid.ProcFs;
import io.vgpu.hostpid.ProcessInfo;
import io.vgpu.hostpid.ProcessMaps;
import io.vgpu.regioncodec.SafeOpen;
import java.nio.charset.StandardCharsets;
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
   * of that collection and counted by reason ({@link NodeEvidence#unseenProcesses()}, the metric
   * {@code vgpu_exporter_evidence_unseen_processes}).
   */
  public static final long DEFAULT_MAPS_BYTES_PER_PASS = 64L << 20;

  /**
   * The share of the pass's budget one pod may spend: one tenant's processes with huge maps cannot
   * leave every other pod unjudged.
   */
  public static final int POD_SHARE_OF_PASS = 4;

  /** The most bytes of a container's {@code /etc/ld.so.preload} read. */
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
  private final long mapsBytesPerPod;
  private DeadlineReads reads = DeadlineReads.shared();

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
    this(
        procFs,
        nvml,
        node,
        clock,
        window,
        sleeper,
        thresholds,
        mapsBytesPerPass,
        mapsBytesPerPass / POD_SHARE_OF_PASS);
  }

  /**
   * @param mapsBytesPerPass bytes of {@code maps} one collection reads over all processes
   * @param mapsBytesPerPod bytes of {@code maps} one collection reads over one pod's processes
   */
  public EvidenceCollector(
      ProcFs procFs,
      Supplier<NvmlSnapshot> nvml,
      Supplier<Optional<NodeMeta>> node,
      InstantSource clock,
      Duration window,
      Sleeper sleeper,
      NodeEvidence.Thresholds thresholds,
      long mapsBytesPerPass,
      long mapsBytesPerPod) {
    this.mapsBytesPerPass = mapsBytesPerPass;
    this.mapsBytesPerPod = mapsBytesPerPod;
    this.procFs = procFs;
    this.nvml = nvml;
    this.node = node;
    this.clock = clock;
    this.window = window;
    this.sleeper = sleeper;
    this.thresholds = thresholds;
  }

  /** This collector reading tenant files through {@code reads} (tests: a short deadline). */
  public EvidenceCollector readingThrough(DeadlineReads reads) {
    this.reads = java.util.Objects.requireNonNull(reads, "reads");
    return this;
  }

  /**
   * Collects evidence for {@code targets}: each a cache root, a {@code <podUID>_<ctr>} directory or
   * one cache file.
   */
  public NodeEvidence collect(List<Path> targets) {
    Map<Path, ContainerTargets.Target> dirs = ContainerTargets.resolve(targets);
    // (device, inode) of every region opened: a second name of one file is judged once.
    Set<String> openedFiles = new HashSet<>();
    List<SampledRegion> opened = new ArrayList<>();
    List<NodeEvidence.Container> containers = new ArrayList<>();
    try {
      for (Map.Entry<Path, ContainerTargets.Target> d : dirs.entrySet()) {
        String dirName =
            d.getKey().getFileName() == null ? "" : d.getKey().getFileName().toString();
        Optional<ContainerKey> key = ContainerKey.parse(dirName);
        if (key.isEmpty() && !d.getValue().files().isEmpty()) {
          // Files named on the command line outside a <podUID>_<container> directory (a copy
          // being examined): judged like any region, under a key that says the pod is unknown.
          key = Optional.of(new ContainerKey(UNKNOWN_POD, dirName.isEmpty() ? "-" : dirName));
        }
        if (key.isEmpty()) {
          continue;
        }
        List<SampledRegion> files = new ArrayList<>();
        for (Path f : d.getValue().files()) {
          SampledRegion o = SampledRegion.of(f, openedFiles);
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
        for (SampledRegion o : containersFiles.get(c.dir())) {
          regions.add(o.second(!window.isZero()));
        }
        done.add(
            new NodeEvidence.Container(
                c.key(),
                c.dir(),
                regions,
                CacheDiscovery.readDegraded(
                    c.dir(), dirs.get(c.dir()).sideFiles(), new SafeOpenSideFileReader())));
      }
      done.sort(Comparator.comparing(NodeEvidence.Container::key));
      List<NodeEvidence.PodProcess> procs = new ArrayList<>(processes(nv));
      procs.addAll(verifiedRecordedHostPids(done, procs));
      return new NodeEvidence(
          clock.instant(),
          window,
          done,
          procs,
          nv,
          node.get(),
          thresholds,
          lastPodsNotFullySeen,
          lastShortfalls());
    } finally {
      opened.forEach(SampledRegion::close);
      containersFiles.clear();
    }
  }

  private final Map<Path, List<SampledRegion>> containersFiles = new HashMap<>();

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
                  preload(c.key().podUid(), procFs.path(slot.hostPid(), "root")),
                  Map.of()));
        }
      }
    }
    return out;
  }

  /**
   * Every pod process that uses the GPU, maps libvgpu or maps a region. Pods are read round-robin
   * within the pass's and each pod's {@code maps} budget ({@link MapsBudget}); a process not read
   * whole puts its pod in the "not fully seen" set.
   */
  List<NodeEvidence.PodProcess> processes(NvmlSnapshot nv) {
    Set<Integer> nvmlPids = new HashSet<>();
    for (GpuSnapshot g : nv.gpus()) {
      g.processes().ifPresent(ps -> ps.stream().map(RunningProcess::pid).forEach(nvmlPids::add));
    }
    // Pod processes by pod, as pids only (a tenant's thousands of processes cost 4 bytes each
    // here); each is read again when its turn comes.
    Map<String, IntList> byPod = new LinkedHashMap<>();
    for (int pid : procFs.listPids()) {
      Optional<ProcessInfo> info = procFs.readProcess(pid);
      if (info.isPresent() && info.get().cgroup().podUid().isPresent()) {
        byPod.computeIfAbsent(info.get().cgroup().podUid().get(), k -> new IntList()).add(pid);
      }
    }
    MapsBudget budget = new MapsBudget(mapsBytesPerPass, mapsBytesPerPod, MAX_MAPS_BYTES);
    List<NodeEvidence.PodProcess> out = new ArrayList<>();
    for (int round = 0; ; round++) {
      boolean any = false;
      for (Map.Entry<String, IntList> pod : byPod.entrySet()) {
        if (round < pod.getValue().size()) {
          any = true;
          inspect(pod.getKey(), pod.getValue().get(round), nvmlPids, budget).ifPresent(out::add);
        }
      }
      if (!any) {
        break;
      }
    }
    out.sort(Comparator.comparingInt(NodeEvidence.PodProcess::hostPid));
    lastShortfalls = budget.shortfalls();
    lastPodsNotFullySeen = budget.notFullySeen();
    int uninspected = lastUninspectedProcesses();
    if (uninspected > 0) {
      LOG.atWarn()
          .addKeyValue("not_fully_seen_processes", uninspected)
          .addKeyValue("pods", lastPodsNotFullySeen.size())
          .addKeyValue("maps_bytes_per_pass", mapsBytesPerPass)
          .addKeyValue("maps_bytes_per_pod", mapsBytesPerPod)
          .log(
              "pod processes not seen whole in this evidence pass: their pods' slots stay UNKNOWN");
    }
    return out;
  }

  /** One pod process, read within the budget; empty when it is not of interest or unseen. */
  private Optional<NodeEvidence.PodProcess> inspect(
      String pod, int pid, Set<Integer> nvmlPids, MapsBudget budget) {
    Optional<ProcessInfo> info = procFs.readProcess(pid);
    if (info.isEmpty() || !info.get().cgroup().podUid().equals(Optional.of(pod))) {
      return Optional.empty(); // exited (or its pid reused) since the listing
    }
    int bound = budget.bound(pod);
    MapsBudget.Shortfall limit = budget.limitOf(pod, bound);
    if (bound == 0) {
      budget.shortfall(pod, limit);
      return Optional.empty();
    }
    Optional<ProcessMaps> read =
        reads.read(pod, procFs.path(pid, "maps"), () -> procFs.readMaps(pid, bound));
    if (read.isEmpty()) {
      budget.shortfall(pod, MapsBudget.Shortfall.DEADLINE);
      return Optional.empty();
    }
    ProcessMaps maps = read.get();
    budget.spend(pod, maps.bytesRead());
    if (!maps.readable()) {
      budget.shortfall(pod, MapsBudget.Shortfall.UNREADABLE);
    } else if (!maps.complete()) {
      // A partial read is never a complete one: the region this process maps may be past it.
      budget.shortfall(pod, limit);
    }
    boolean gpu = maps.gpu() || nvmlPids.contains(pid);
    if (!gpu && maps.vgpu().isEmpty() && maps.cacheInodes().isEmpty()) {
      return Optional.empty();
    }
    ProcessInfo p = info.get();
    return Optional.of(
        new NodeEvidence.PodProcess(
            pid,
            p.startTimeTicks(),
            p.innermostPid(),
            pod,
            p.cgroup().containerId(),
            maps.vgpu(),
            maps.cacheInodes(),
            gpu,
            preload(pod, procFs.path(pid, "root")),
            environment(pod, pid)));
  }

  /** Pod processes the last collection did not see whole (left out or read in part). */
  public int lastUninspectedProcesses() {
    return lastShortfalls.values().stream().mapToInt(Integer::intValue).sum();
  }

  /**
   * Pod processes the last collection did not see whole, by reason label ({@code pass_budget},
   * {@code pod_budget}, {@code maps_too_large}, {@code unreadable}, {@code deadline}).
   */
  public Map<String, Integer> lastShortfalls() {
    Map<String, Integer> out = new java.util.TreeMap<>();
    lastShortfalls.forEach((k, v) -> out.put(k.label(), v));
    return out;
  }

  /** Every shortfall reason label (a metric reports each, zero included). */
  public static List<String> shortfallReasons() {
    return java.util.Arrays.stream(MapsBudget.Shortfall.values())
        .map(MapsBudget.Shortfall::label)
        .toList();
  }

  private volatile Map<MapsBudget.Shortfall, Integer> lastShortfalls = Map.of();

  /** Pods of the last collection with a process whose maps were unreadable or left out. */
  private volatile Set<String> lastPodsNotFullySeen = Set.of();

  /** Growable int list (no boxing per pid). */
  private static final class IntList {
    private int[] values = new int[4];
    private int size;

    void add(int v) {
      if (size == values.length) {
        values = java.util.Arrays.copyOf(values, size * 2);
      }
      values[size++] = v;
    }

    int get(int i) {
      return values[i];
    }

    int size() {
      return size;
    }
  }

  /** The variables the checks read from {@code environ}; empty when it was given up. */
  Map<String, String> environment(String pod, int pid) {
    return reads
        .read(pod, procFs.path(pid, "environ"), () -> procFs.readEnviron(pid, ENV_KEYS))
        .orElse(Map.of());
  }

  /**
   * What {@code etc/ld.so.preload} below a container's root says about libvgpu. The file is the
   * tenant's: opened through {@link SafeOpen} rooted at {@code /proc/<pid>/root} (no link followed,
   * so an absolute link cannot reach the exporter's own files; a FIFO is never opened), and only
   * the fact leaves this method, never the content.
   */
  NodeEvidence.Preload preload(String pod, Path containerRoot) {
    return reads
        .read(pod, containerRoot.resolve("etc/ld.so.preload"), () -> preload(containerRoot))
        .orElse(NodeEvidence.Preload.UNREADABLE);
  }

  /**
   * The same, read on the calling thread. Only from the container root's own filesystem: a file
   * reached across a mount below it (FUSE or NFS the tenant serves, whose reads it can stall) is
   * never opened ({@link NodeEvidence.Preload#UNREADABLE}).
   */
  static NodeEvidence.Preload preload(Path containerRoot) {
    SafeOpen.Small s =
        SafeOpen.readSmallOnOneMount(
            containerRoot, Path.of("etc", "ld.so.preload"), MAX_SMALL_FILE_BYTES);
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
}
