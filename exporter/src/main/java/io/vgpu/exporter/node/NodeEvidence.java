package io.vgpu.exporter.node;

import io.vgpu.exporter.discovery.ContainerKey;
import io.vgpu.exporter.discovery.DegradedMark;
import io.vgpu.exporter.k8s.NodeMeta;
import io.vgpu.exporter.nvml.NvmlSnapshot;
import io.vgpu.regioncodec.ProcessSlot;
import io.vgpu.regioncodec.RegionSnapshot;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;

/**
 * Everything the doctor's checks look at, gathered once from the node (cache root, procfs, NVML,
 * node annotations) by {@link EvidenceCollector} or built directly by tests. Checks are pure
 * functions of this value. Immutable.
 *
 * @param now when the evidence was gathered (end of the sampling window)
 * @param window time between the two region samples ({@link Region#first()} and {@link
 *     Region#second()})
 * @param containers every container directory under the cache root, sorted by key
 * @param processes every process of a Kubernetes pod on the node that uses the GPU or maps a region
 *     (host view)
 * @param nvml the NVML view; {@link NvmlSnapshot#unavailable} when NVML could not be used
 * @param node HAMi's node annotations; empty when the API server was not asked or unreachable
 * @param thresholds the doctor's limits
 * @param podsNotFullySeen pods with a process whose {@code maps} could not be read (another uid
 *     without CAP_SYS_PTRACE, the process exiting mid-read) or was left out by the read budget: a
 *     slot of such a pod that matches no seen process may belong to the unseen one, so it is
 *     UNKNOWN, never GONE (cleanup must not free a live process's slot)
 * @param unseenProcesses pod processes not seen whole, by reason label ({@code pass_budget}, {@code
 *     pod_budget}, {@code maps_too_large}, {@code unreadable}, {@code deadline}); reasons with none
 *     absent
 */
public record NodeEvidence(
    Instant now,
    Duration window,
    List<Container> containers,
    List<PodProcess> processes,
    NvmlSnapshot nvml,
    Optional<NodeMeta> node,
    Thresholds thresholds,
    Set<String> podsNotFullySeen,
    Map<String, Integer> unseenProcesses) {

  /** The NVML status reason meaning "NVML was deliberately not asked" (checks skip, not fail). */
  public static final String NVML_NOT_QUERIED = "not queried";

  public NodeEvidence {
    Objects.requireNonNull(now, "now");
    Objects.requireNonNull(window, "window");
    containers = List.copyOf(containers);
    processes = List.copyOf(processes);
    Objects.requireNonNull(nvml, "nvml");
    Objects.requireNonNull(node, "node");
    Objects.requireNonNull(thresholds, "thresholds");
    podsNotFullySeen = Set.copyOf(podsNotFullySeen);
    unseenProcesses = Map.copyOf(unseenProcesses);
  }

  /** Evidence without a count of unseen processes by reason. */
  public NodeEvidence(
      Instant now,
      Duration window,
      List<Container> containers,
      List<PodProcess> processes,
      NvmlSnapshot nvml,
      Optional<NodeMeta> node,
      Thresholds thresholds,
      Set<String> podsNotFullySeen) {
    this(now, window, containers, processes, nvml, node, thresholds, podsNotFullySeen, Map.of());
  }

  /** Evidence in which every pod process was seen whole. */
  public NodeEvidence(
      Instant now,
      Duration window,
      List<Container> containers,
      List<PodProcess> processes,
      NvmlSnapshot nvml,
      Optional<NodeMeta> node,
      Thresholds thresholds) {
    this(now, window, containers, processes, nvml, node, thresholds, Set.of());
  }

  /** Whether NVML was asked at all. */
  public boolean nvmlQueried() {
    return nvml.status().up() || !NVML_NOT_QUERIED.equals(nvml.status().reason());
  }

  /** Pod UIDs seen in container directories or owning GPU processes, sorted. */
  public Set<String> podUids() {
    Set<String> uids = new TreeSet<>();
    containers.forEach(c -> uids.add(c.key().podUid()));
    processes.forEach(p -> uids.add(p.podUid()));
    return uids;
  }

  /** Processes of one pod. */
  public List<PodProcess> processesOf(String podUid) {
    return processes.stream().filter(p -> p.podUid().equals(podUid)).toList();
  }

  /** Container directories of one pod. */
  public List<Container> containersOf(String podUid) {
    return containers.stream().filter(c -> c.key().podUid().equals(podUid)).toList();
  }

  /** This evidence narrowed to one pod (node-wide facts kept). */
  public NodeEvidence forPod(String podUid) {
    return new NodeEvidence(
        now,
        window,
        containersOf(podUid),
        processesOf(podUid),
        nvml,
        node,
        thresholds,
        podsNotFullySeen.contains(podUid) ? Set.of(podUid) : Set.of(),
        unseenProcesses);
  }

  /**
   * The doctor's limits.
   *
   * @param handshakeMaxAge HAMi's scheduler distrusts a node whose handshake is older than this
   * @param lockHoldMax a live holder keeping the slot-table lock longer than this is stuck
   * @param memoryGapBytes NVML vs region difference tolerated (contexts, allocator slack)
   * @param memoryGapRatio the same as a share of NVML's number; the larger bound applies
   * @param smOverLimitPoints utilization this many points above the SM limit is "not enforced"
   * @param limiterFarBelowRatio throttling while below this share of the limit is "misfiring"
   * @param slotTableWarnRatio slot-table fill that earns a warning
   */
  public record Thresholds(
      Duration handshakeMaxAge,
      Duration lockHoldMax,
      long memoryGapBytes,
      double memoryGapRatio,
      int smOverLimitPoints,
      double limiterFarBelowRatio,
      double slotTableWarnRatio) {
    public Thresholds {
      Objects.requireNonNull(handshakeMaxAge, "handshakeMaxAge");
      Objects.requireNonNull(lockHoldMax, "lockHoldMax");
      if (memoryGapBytes < 0 || memoryGapRatio < 0 || smOverLimitPoints < 0) {
        throw new IllegalArgumentException("thresholds must be non-negative");
      }
    }

    public static Thresholds defaults() {
      return new Thresholds(
          Duration.ofSeconds(300), Duration.ofSeconds(10), 256L << 20, 0.10, 10, 0.5, 0.9);
    }
  }

  /**
   * One {@code <podUID>_<container>} directory.
   *
   * @param key pod UID and container name
   * @param dir the directory
   * @param regions its {@code *.cache} files (empty: the library never created one)
   * @param degraded its libvgpu {@code *.cache.degraded} side files, as read
   */
  public record Container(
      ContainerKey key, Path dir, List<Region> regions, List<DegradedMark> degraded) {
    public Container {
      Objects.requireNonNull(key, "key");
      Objects.requireNonNull(dir, "dir");
      regions = List.copyOf(regions);
      degraded = List.copyOf(degraded);
    }

    /** A directory without side files. */
    public Container(ContainerKey key, Path dir, List<Region> regions) {
      this(key, dir, regions, List.of());
    }
  }

  /**
   * One cache file, sampled twice {@code window} apart.
   *
   * @param path the file
   * @param inode its inode (processes that map it are its users); -1 when unknown
   * @param device the {@code st_dev} of the file the inode belongs to, from the same open
   *     descriptor the samples were read through; -1 when unknown
   * @param first the first sample; empty when unreadable
   * @param second the second sample; empty when unreadable (or no window was taken: then equal to
   *     first)
   * @param error why it could not be read, empty when it could
   * @param semaphoreFirst HAMi-core's slot-table semaphore value at the first sample (1 free, 0
   *     taken); -1 when unknown
   * @param semaphoreSecond the same at the second sample; equal to the first without a window
   */
  public record Region(
      Path path,
      long inode,
      long device,
      Optional<RegionSnapshot> first,
      Optional<RegionSnapshot> second,
      Optional<String> error,
      int semaphoreFirst,
      int semaphoreSecond) {
    public Region {
      Objects.requireNonNull(path, "path");
      Objects.requireNonNull(first, "first");
      Objects.requireNonNull(second, "second");
      Objects.requireNonNull(error, "error");
    }

    /** A region whose semaphore was not read (free as far as anyone knows). */
    public Region(
        Path path,
        long inode,
        long device,
        Optional<RegionSnapshot> first,
        Optional<RegionSnapshot> second,
        Optional<String> error) {
      this(path, inode, device, first, second, error, -1, -1);
    }

    /**
     * Whether the semaphore was down in every sample taken: with no holder recorded, that is a lost
     * post (HAMi #2500) rather than a holder caught between its wait and its store.
     */
    public boolean semaphoreTakenThroughout() {
      return semaphoreFirst == 0 && semaphoreSecond == 0;
    }

    /**
     * The codec's reason word for an unreadable file ({@code unknown_version}, {@code bad_magic},
     * ...), the same word {@code vgpu_container_region_unreadable} carries; empty when readable.
     */
    public Optional<String> unreadableReason() {
      if (latest().isPresent()) {
        return Optional.empty();
      }
      String e = error.orElse("unreadable");
      int colon = e.indexOf(':');
      String word = colon > 0 ? e.substring(0, colon) : e;
      return Optional.of(word.matches("[a-z_]{1,40}") ? word : "unreadable");
    }

    /**
     * {@code DEV:INO} of the file that was judged, for shrreg-tool's {@code --expect-inode}; empty
     * when the file was never opened.
     */
    public Optional<String> deviceAndInode() {
      return inode < 0 || device == -1
          ? Optional.empty()
          : Optional.of(Long.toUnsignedString(device) + ":" + Long.toUnsignedString(inode));
    }

    /** The latest readable sample. */
    public Optional<RegionSnapshot> latest() {
      return second.isPresent() ? second : first;
    }
  }

  /** What a container's {@code /etc/ld.so.preload} says, as a fact. */
  public enum Preload {
    /** A regular file that names libvgpu.so. */
    NAMES_LIBVGPU("names libvgpu.so"),
    /** A regular file that does not name it. */
    DOES_NOT_NAME_LIBVGPU("does not name libvgpu.so"),
    /** Not there. */
    MISSING("is missing"),
    /** A link, FIFO, device, directory, too large or not readable: never followed or read. */
    UNREADABLE("is not a readable regular file (a link, FIFO or device is never followed)");

    private final String says;

    Preload(String says) {
      this.says = says;
    }

    /** How the report phrases it after "its /etc/ld.so.preload ". */
    public String says() {
      return says;
    }
  }

  /**
   * A process of a pod, as seen from the host.
   *
   * @param hostPid pid in the host namespace
   * @param startTimeTicks field 22 of its stat
   * @param containerPid innermost namespace pid (what the region records as {@code pid})
   * @param podUid owning pod (from its cgroup)
   * @param containerId runtime container id, when the cgroup names one
   * @param vgpuLibraries mapped files whose name contains {@code libvgpu}, as "path (dev:inode)"
   * @param mappedInodes inodes of mapped {@code *.cache} files (the regions it uses)
   * @param usesGpu maps libcuda / libnvidia-ml, or NVML lists it on a GPU
   * @param ldSoPreload what its root's {@code /etc/ld.so.preload} says about libvgpu (a fact, never
   *     the content: the file is the tenant's and may be a link to anything)
   * @param environment the few variables the checks read (CUDA_DISABLE_CONTROL, LD_PRELOAD,
   *     CUDA_DEVICE_MEMORY_SHARED_CACHE); values only when set
   */
  public record PodProcess(
      int hostPid,
      long startTimeTicks,
      int containerPid,
      String podUid,
      Optional<String> containerId,
      List<String> vgpuLibraries,
      Set<Long> mappedInodes,
      boolean usesGpu,
      Preload ldSoPreload,
      Map<String, String> environment) {
    public PodProcess {
      Objects.requireNonNull(podUid, "podUid");
      Objects.requireNonNull(containerId, "containerId");
      vgpuLibraries = List.copyOf(vgpuLibraries);
      mappedInodes = Set.copyOf(mappedInodes);
      Objects.requireNonNull(ldSoPreload, "ldSoPreload");
      environment = Map.copyOf(environment);
    }

    /** Whether this process maps region {@code r}. */
    public boolean maps(Region r) {
      return r.inode() >= 0 && mappedInodes.contains(r.inode());
    }
  }

  /**
   * The live process behind a slot: one of the pod's processes that maps the slot's region and
   * whose innermost pid is the slot's pid (and, when the library recorded one, whose start time
   * matches). Empty when the process is gone.
   */
  public Optional<PodProcess> processOfSlot(Container c, Region r, ProcessSlot slot) {
    long recordedStart = slot.extension().map(e -> e.startTimeTicks()).orElse(0L);
    return processesOf(c.key().podUid()).stream()
        .filter(p -> p.maps(r) && p.containerPid() == slot.pid())
        .filter(p -> recordedStart == 0 || p.startTimeTicks() == recordedStart)
        .findFirst();
  }

  /** What became of a slot's process. */
  public enum SlotFate {
    /** A live process of the pod maps the region with this pid. */
    ALIVE,
    /** The pod's processes are all visible and none is this one. */
    GONE,
    /**
     * Not found, but a process of the pod could not be seen whole (its maps unreadable or left out
     * by the read budget), or the pod's processes are not visible here and the slot carries HAMi's
     * hostpid == pid signature: it may be alive. Never cleaned up.
     */
    UNKNOWN
  }

  /** The fate of one slot (see {@link SlotFate}). */
  public SlotFate fateOf(Container c, Region r, ProcessSlot slot) {
    if (processOfSlot(c, r, slot).isPresent()) {
      return SlotFate.ALIVE;
    }
    if (podsNotFullySeen.contains(c.key().podUid())) {
      return SlotFate.UNKNOWN; // the slot may be the process whose maps could not be read
    }
    boolean podVisible =
        processesOf(c.key().podUid()).stream()
            .anyMatch(p -> p.usesGpu() || !p.vgpuLibraries().isEmpty());
    return !podVisible && slot.hostPid() == slot.pid() ? SlotFate.UNKNOWN : SlotFate.GONE;
  }

  /** The live process holding a container pid in region {@code r}, if any. */
  public Optional<PodProcess> processOfContainerPid(Container c, Region r, int containerPid) {
    return processesOf(c.key().podUid()).stream()
        .filter(p -> p.maps(r) && p.containerPid() == containerPid)
        .findFirst();
  }

  /**
   * A GPU process of a pod whose regions set limits, with no slot in any of the pod's regions: the
   * library does not count its memory, so no limit applies to it (a process started without the
   * environment by sshd, {@code su -} or a daemon that clears it, or one without libvgpu at all).
   *
   * @param container the container directory whose region it maps, or the pod's only one; empty
   *     when neither tells
   * @param reason {@code library_not_loaded} (no libvgpu mapped) or {@code not_registered} (libvgpu
   *     mapped, no slot)
   */
  public record Unslotted(
      String podUid, Optional<String> container, PodProcess process, String reason) {
    public static final String LIBRARY_NOT_LOADED = "library_not_loaded";
    public static final String NOT_REGISTERED = "not_registered";
  }

  /** Every {@link Unslotted} process, by host pid. */
  public List<Unslotted> unslottedProcesses() {
    List<Unslotted> out = new java.util.ArrayList<>();
    for (String uid : podUids()) {
      List<Container> dirs = containersOf(uid);
      boolean limited =
          dirs.stream()
              .flatMap(c -> c.regions().stream())
              .flatMap(r -> r.latest().stream())
              .anyMatch(s -> s.devices().stream().anyMatch(d -> d.memoryLimitBytes() > 0));
      if (!limited) {
        continue;
      }
      Set<Integer> slotted = new java.util.HashSet<>();
      for (Container c : dirs) {
        for (Region r : c.regions()) {
          r.latest().ifPresent(s -> s.processes().forEach(p -> slotted.add(p.pid())));
        }
      }
      for (PodProcess p : processesOf(uid)) {
        if (!p.usesGpu() || slotted.contains(p.containerPid())) {
          continue;
        }
        Optional<String> container =
            dirs.stream()
                .filter(c -> c.regions().stream().anyMatch(p::maps))
                .map(c -> c.key().containerName())
                .findFirst();
        if (container.isEmpty() && dirs.size() == 1) {
          container = Optional.of(dirs.getFirst().key().containerName());
        }
        out.add(
            new Unslotted(
                uid,
                container,
                p,
                p.vgpuLibraries().isEmpty()
                    ? Unslotted.LIBRARY_NOT_LOADED
                    : Unslotted.NOT_REGISTERED));
      }
    }
    out.sort(java.util.Comparator.comparingInt(u -> u.process().hostPid()));
    return out;
  }
}
