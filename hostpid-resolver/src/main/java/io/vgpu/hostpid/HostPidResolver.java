package io.vgpu.hostpid;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import io.vgpu.hostpid.internal.ProcessIndex;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.LongSupplier;
import java.util.stream.IntStream;

/**
 * Resolves in-container pids to host pids, and host pids to pods, from periodic scans of a procfs.
 *
 * <p>A scan lists the root and, per pid, reads {@code stat} for the start time; a process whose
 * (pid, start time) is cached costs nothing more, a new one is read in full (NSpid chain, cgroup
 * identity). The scan's result is an immutable index by pod, so {@link #resolve} and {@link
 * #ownerOf} touch no files until the scan interval has passed, and new or vanished processes are
 * noticed within one interval. {@link #refresh()} forces a scan.
 *
 * <p>{@link #resolve} only ever looks at processes whose own cgroup names the pod asked about:
 * whatever pid a tenant writes into its region, it resolves to a process of its own pod or to
 * nothing. Several matches are {@link Unresolved.Reason#AMBIGUOUS} unless a container id narrows
 * them to one; the resolver never picks.
 *
 * <p>Thread-safe: readers share the latest immutable index; one thread at a time scans, and callers
 * that find a scan due while another thread is scanning use the previous index.
 */
public final class HostPidResolver {

  /** Default time between scans when none is given. */
  public static final Duration DEFAULT_SCAN_INTERVAL = Duration.ofSeconds(10);

  /**
   * A process first seen outside any pod is read again on later scans until it has been seen that
   * way for this long: a runtime clones a container's first process before moving it into the
   * container's cgroup, and a scan may catch it in between.
   */
  static final long CGROUP_SETTLE_NANOS = TimeUnit.SECONDS.toNanos(2);

  private static final int MAX_CACHED_PROCESSES = 1 << 18;

  /**
   * From this many listed pids on, a scan reads processes on several threads (the common fork-join
   * pool): each read is a few syscalls, and a cold scan of a big node is bound by them.
   */
  static final int PARALLEL_SCAN_THRESHOLD = 1024;

  private static final int MAX_REMEMBERED_RESOLUTIONS = 1 << 16;

  private final ProcFs procFs;
  private final long scanIntervalNanos;
  private final LongSupplier nanoTicker;
  private final ReentrantLock scanLock = new ReentrantLock();

  /** (host pid, start time) of live processes to what they are; pruned to the live set by scans. */
  private final Cache<PidStart, CachedProcess> processes;

  /** (pod, container, in-container pid) to what it once resolved to, to tell gone from foreign. */
  private final Cache<SlotKey, PidStart> pastResolutions;

  private volatile ProcessIndex index;
  private volatile ScanStats lastScan = ScanStats.NONE;

  /**
   * @param procFs where processes are read
   * @param scanInterval how old the index may get before a call triggers a rescan
   * @param nanoTicker monotonic nanoseconds ({@code System::nanoTime} in production)
   */
  public HostPidResolver(ProcFs procFs, Duration scanInterval, LongSupplier nanoTicker) {
    if (procFs == null || scanInterval == null || nanoTicker == null) {
      throw new IllegalArgumentException("procFs, scanInterval and nanoTicker must not be null");
    }
    if (scanInterval.isNegative()) {
      throw new IllegalArgumentException("scanInterval must not be negative: " + scanInterval);
    }
    this.procFs = procFs;
    this.scanIntervalNanos = scanInterval.toNanos();
    this.nanoTicker = nanoTicker;
    this.processes = Caffeine.newBuilder().maximumSize(MAX_CACHED_PROCESSES).build();
    this.pastResolutions =
        Caffeine.newBuilder()
            .maximumSize(MAX_REMEMBERED_RESOLUTIONS)
            .expireAfterWrite(Duration.ofHours(1))
            .ticker(nanoTicker::getAsLong)
            .build();
  }

  /** A resolver over {@code procFs} scanning every {@link #DEFAULT_SCAN_INTERVAL}. */
  public HostPidResolver(ProcFs procFs) {
    this(procFs, DEFAULT_SCAN_INTERVAL, System::nanoTime);
  }

  /**
   * Resolves the in-container pids of one container (as its region slots record them).
   *
   * @param podUid the pod's UID, with dashes or underscores; an unparsable one matches nothing
   * @param containerId the container's id ({@code containerd://<hex>} or bare), when known; it
   *     narrows the candidates to that container and so settles pid 1 (pause and app both have it)
   * @param containerPids in-container pids; duplicates collapse
   * @return one entry per distinct pid, in iteration order
   * @throws ProcFsUnavailableException when a due scan cannot list the procfs root
   */
  public Map<Integer, PidResolution> resolve(
      String podUid, Optional<String> containerId, Collection<Integer> containerPids) {
    Map<Integer, PidResolution> result = LinkedHashMap.newLinkedHashMap(containerPids.size());
    Optional<String> uid = CgroupIdentity.normalizePodUid(podUid);
    Optional<String> container = containerId.flatMap(CgroupIdentity::normalizeContainerId);
    boolean containerUnusable = containerId.isPresent() && container.isEmpty();
    ProcessIndex current = currentIndex();
    ProcessIndex.Pod pod = uid.map(current::pod).orElse(null);
    for (Integer boxed : containerPids) {
      int pid = boxed == null ? 0 : boxed;
      if (result.containsKey(pid)) {
        continue;
      }
      if (pid <= 0) {
        result.put(pid, Unresolved.of(Unresolved.Reason.INVALID_PID));
        continue;
      }
      List<ProcessInfo> candidates =
          pod == null || containerUnusable ? List.of() : pod.withInnermostPid(pid, container);
      SlotKey slot = uid.isPresent() ? new SlotKey(uid.get(), container.orElse(""), pid) : null;
      if (candidates.size() == 1) {
        ProcessInfo match = candidates.getFirst();
        PidStart key = new PidStart(match.hostPid(), match.startTimeTicks());
        if (slot != null && !key.equals(pastResolutions.getIfPresent(slot))) {
          pastResolutions.put(slot, key);
        }
        result.put(pid, new Resolved(match.hostPid(), match.startTimeTicks()));
      } else if (candidates.size() > 1) {
        result.put(pid, Unresolved.of(Unresolved.Reason.AMBIGUOUS));
      } else {
        PidStart past = slot == null ? null : pastResolutions.getIfPresent(slot);
        boolean gone = past != null && !current.contains(past.pid(), past.startTimeTicks());
        result.put(
            pid,
            Unresolved.of(gone ? Unresolved.Reason.PROCESS_GONE : Unresolved.Reason.NOT_IN_POD));
      }
    }
    return result;
  }

  /**
   * The pod, container and in-container pid of a host process, for attributing NVML's process
   * lists. Answers from the index; a pid the index does not know (started since the last scan) is
   * read directly. Empty for processes outside pods, of unknown cgroup, or gone.
   *
   * @throws ProcFsUnavailableException when a due scan cannot list the procfs root
   */
  public Optional<ProcessOwner> ownerOf(int hostPid) {
    if (hostPid <= 0) {
      return Optional.empty();
    }
    ProcessInfo known = currentIndex().process(hostPid);
    if (known != null) {
      return ProcessOwner.of(known);
    }
    OptionalLong start = procFs.startTimeTicks(hostPid);
    if (start.isEmpty()) {
      return Optional.empty();
    }
    PidStart key = new PidStart(hostPid, start.getAsLong());
    CachedProcess cached = processes.getIfPresent(key);
    if (cached == null) {
      if (!(procFs.readIfStartedAt(hostPid, key.startTimeTicks())
          instanceof ProcessRead.Found found)) {
        return Optional.empty();
      }
      cached = new CachedProcess(found.process(), nanoTicker.getAsLong());
      processes.put(key, cached);
    }
    return ProcessOwner.of(cached.process());
  }

  /**
   * Whether the process that had {@code hostPid} at {@code startTimeTicks} still runs: one read of
   * its {@code stat}, never cached (a reused pid has another start time; a zombie counts as gone).
   */
  public boolean isAlive(int hostPid, long startTimeTicks) {
    return hostPid > 0 && procFs.isAlive(hostPid, startTimeTicks);
  }

  /**
   * Every live process the index places in the pod (and container, if given), e.g. to find GPU
   * processes without a region slot. Empty for an unparsable pod UID or container id.
   */
  public List<ProcessInfo> processesOf(String podUid, Optional<String> containerId) {
    Optional<String> uid = CgroupIdentity.normalizePodUid(podUid);
    Optional<String> container = containerId.flatMap(CgroupIdentity::normalizeContainerId);
    if (uid.isEmpty() || (containerId.isPresent() && container.isEmpty())) {
      return List.of();
    }
    ProcessIndex.Pod pod = currentIndex().pod(uid.get());
    return pod == null ? List.of() : pod.processes(container);
  }

  /**
   * Scans now, whatever the interval says (waits for a scan in progress, then scans again).
   *
   * @throws ProcFsUnavailableException when the procfs root cannot be listed
   */
  public void refresh() {
    scanLock.lock();
    try {
      scan();
    } finally {
      scanLock.unlock();
    }
  }

  /** What the latest completed scan saw; {@link ScanStats#NONE} before the first. */
  public ScanStats lastScan() {
    return lastScan;
  }

  public ProcFs procFs() {
    return procFs;
  }

  private ProcessIndex currentIndex() {
    ProcessIndex current = index;
    if (current != null && !isDue(current)) {
      return current;
    }
    if (current == null) {
      scanLock.lock(); // nothing to answer from yet: wait for the first scan
    } else if (!scanLock.tryLock()) {
      return current; // another thread is scanning; its answer is at most one interval away
    }
    try {
      current = index;
      if (current == null || isDue(current)) {
        current = scan();
      }
      return current;
    } finally {
      scanLock.unlock();
    }
  }

  private boolean isDue(ProcessIndex current) {
    return nanoTicker.getAsLong() - current.scannedAtNanos() >= scanIntervalNanos;
  }

  /** Caller holds {@link #scanLock}. */
  private ProcessIndex scan() {
    long startNanos = nanoTicker.getAsLong();
    int[] pids = procFs.listPids();
    Seen[] seen = new Seen[pids.length];
    IntStream each = IntStream.range(0, pids.length);
    if (pids.length >= PARALLEL_SCAN_THRESHOLD) {
      each = each.parallel(); // file reads dominate; a cold scan of a big node is I/O-syscall bound
    }
    each.forEach(i -> seen[i] = examine(pids[i], startNanos));
    List<ProcessInfo> live = new ArrayList<>(pids.length);
    Set<PidStart> liveKeys = HashSet.newHashSet(pids.length);
    int gone = 0;
    int unusable = 0;
    int hits = 0;
    int misses = 0;
    for (Seen s : seen) {
      switch (s.outcome()) {
        case HIT -> hits++;
        case MISS -> misses++;
        case GONE -> gone++;
        case UNUSABLE -> unusable++;
      }
      if (s.key() != null) {
        live.add(s.process().process());
        liveKeys.add(s.key());
      }
    }
    processes.asMap().keySet().retainAll(liveKeys);
    long endNanos = nanoTicker.getAsLong();
    ProcessIndex built = ProcessIndex.build(live, endNanos);
    ScanStats previous = lastScan;
    lastScan =
        new ScanStats(
            previous.scans() + 1,
            live.size(),
            built.podProcessCount(),
            built.unknownCgroupCount(),
            gone,
            unusable,
            hits,
            misses,
            endNanos - startNanos);
    index = built;
    return built;
  }

  /** One listed pid: its stat, then the cache, then (on a miss) its status and cgroup. */
  private Seen examine(int pid, long scanStartNanos) {
    ProcFs.StatRead stat = procFs.readStat(pid);
    if (stat.problem() != null) {
      return stat.problem() instanceof ProcessRead.Gone ? Seen.GONE : Seen.UNUSABLE;
    }
    PidStart key = new PidStart(pid, stat.stat().startTimeTicks());
    CachedProcess cached = processes.getIfPresent(key);
    if (cached != null && !cached.mayStillMove(scanStartNanos)) {
      return new Seen(Outcome.HIT, key, cached);
    }
    return switch (procFs.readIfStartedAt(pid, key.startTimeTicks())) {
      case ProcessRead.Found found -> {
        long firstSeen = cached != null ? cached.firstReadNanos() : scanStartNanos;
        CachedProcess fresh = new CachedProcess(found.process(), firstSeen);
        processes.put(key, fresh);
        yield new Seen(Outcome.MISS, key, fresh);
      }
      case ProcessRead.Gone g -> Seen.GONE;
      case ProcessRead.Unusable u -> Seen.UNUSABLE;
    };
  }

  private enum Outcome {
    HIT,
    MISS,
    GONE,
    UNUSABLE
  }

  /** What a scan learned about one pid; key and process are null unless it is live. */
  private record Seen(Outcome outcome, PidStart key, CachedProcess process) {
    static final Seen GONE = new Seen(Outcome.GONE, null, null);
    static final Seen UNUSABLE = new Seen(Outcome.UNUSABLE, null, null);
  }

  /** A process identity that survives pid reuse. */
  private record PidStart(int pid, long startTimeTicks) {}

  /** Where a region slot's pid was last found. */
  private record SlotKey(String podUid, String containerId, int innermostPid) {}

  /** A cached read, with when it was first read (to re-check a process caught before its move). */
  private record CachedProcess(ProcessInfo process, long firstReadNanos) {
    boolean mayStillMove(long nowNanos) {
      return !process.cgroup().isPod() && nowNanos - firstReadNanos < CGROUP_SETTLE_NANOS;
    }
  }
}
