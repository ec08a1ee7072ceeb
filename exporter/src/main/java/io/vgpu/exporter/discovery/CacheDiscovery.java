package io.vgpu.exporter.discovery;

import io.vgpu.exporter.loops.LoopHealth;
import java.io.IOException;
import java.nio.file.AccessDeniedException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.time.Duration;
import java.time.InstantSource;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.PriorityQueue;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Keeps one mapping per {@code <root>/<podUID>_<ctr>/*.cache} file: maps new files once, remaps a
 * file that was replaced (inode or size changed), unmaps files that disappeared. An inotify watch
 * (WatchService) triggers a pass within ~50 ms; a periodic full rescan heals missed events.
 *
 * <p>Never follows symbolic links: a symlinked container directory is skipped and a symlinked cache
 * file is reported as {@code symlink}. A bad file never fails its directory.
 *
 * <p>Thread-safety: passes are serialized (one discovery thread, {@link #rescan()} is
 * synchronized); {@link #current()} is a lock-free read of the latest immutable snapshot.
 */
public final class CacheDiscovery implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(CacheDiscovery.class);

  /**
   * At most this many {@code .cache} files are mapped per container directory (HAMi's device plugin
   * creates one; restarts and multi-process tools a few). A tenant owns its directory, so without a
   * bound it could multiply its series and mappings at will; the rest are counted as {@code
   * reason="too_many_files"} and left unmapped.
   */
  public static final int MAX_FILES_PER_CONTAINER = TenantDirListing.MAX_FILES;

  private static final long DEBOUNCE_MILLIS = 50;

  private final Path root;
  private final Duration rescanInterval;
  private final InstantSource clock;
  private final ParseErrors errors;
  private final SideFileReader sideFiles;
  private final LoopHealth health;
  private final int maxContainers;
  private volatile int skippedContainers;
  private final FileMappings mappings;
  private final DiscoveryWatcher watcher = new DiscoveryWatcher(this::requestRescan, LOG);
  private final Set<String> reportedBadDirs = new HashSet<>();
  private Optional<String> lastRootProblem = Optional.empty(); // guarded by this

  /**
   * Unmapped excess files per container directory at its last pass; rebuilt every pass (so a
   * removed directory's entry goes with it).
   */
  private Map<Path, Integer> excessFiles = new HashMap<>();

  private final List<Consumer<DiscoverySnapshot>> listeners = new CopyOnWriteArrayList<>();
  private final AtomicBoolean rescanPending = new AtomicBoolean();
  private volatile DiscoverySnapshot current = DiscoverySnapshot.initial();
  private long generation;
  private boolean closed;
  private ScheduledExecutorService executor;

  /**
   * @param root the cache root ({@code /usr/local/vgpu/containers})
   * @param rescanInterval period of the full rescan
   * @param clock time source for snapshot timestamps
   * @param writable map read-write (only the write-back modes need it)
   * @param errors where open/read failures are counted
   */
  public CacheDiscovery(
      Path root,
      Duration rescanInterval,
      InstantSource clock,
      boolean writable,
      ParseErrors errors) {
    this(root, rescanInterval, clock, writable, errors, DEFAULT_MAX_CONTAINERS);
  }

  /**
   * Default of {@code --discovery.max-containers}. Under the launcher's 48 MiB heap 1 000 region
   * containers leave ~33 MiB live after a scrape; 2 000 left ~50 MiB, more than the heap, and the
   * process ended on OutOfMemoryError (BoundedCostTest, measured in docs/fleet.md).
   */
  public static final int DEFAULT_MAX_CONTAINERS = 1000;

  /**
   * @param sideFiles how {@code *.cache.degraded} side files are read
   */
  public CacheDiscovery(
      Path root,
      Duration rescanInterval,
      InstantSource clock,
      boolean writable,
      ParseErrors errors,
      SideFileReader sideFiles) {
    this(root, rescanInterval, clock, writable, errors, sideFiles, DEFAULT_MAX_CONTAINERS);
  }

  /**
   * @param maxContainers at most this many container directories are read per pass (the first by
   *     name); the rest are skipped and reported by {@link #skippedContainers()}
   */
  public CacheDiscovery(
      Path root,
      Duration rescanInterval,
      InstantSource clock,
      boolean writable,
      ParseErrors errors,
      int maxContainers) {
    this(
        root, rescanInterval, clock, writable, errors, new SafeOpenSideFileReader(), maxContainers);
  }

  /**
   * @param sideFiles how {@code *.cache.degraded} side files are read
   * @param maxContainers at most this many container directories are read per pass (the first by
   *     name); the rest are skipped and reported by {@link #skippedContainers()}
   */
  public CacheDiscovery(
      Path root,
      Duration rescanInterval,
      InstantSource clock,
      boolean writable,
      ParseErrors errors,
      SideFileReader sideFiles,
      int maxContainers) {
    this.sideFiles = Objects.requireNonNull(sideFiles, "sideFiles");
    this.maxContainers = maxContainers;
    this.root = Objects.requireNonNull(root, "root");
    this.rescanInterval = Objects.requireNonNull(rescanInterval, "rescanInterval");
    this.clock = Objects.requireNonNull(clock, "clock");
    this.errors = Objects.requireNonNull(errors, "errors");
    this.mappings = new FileMappings(writable, this.errors, LOG);
    Duration stuck = rescanInterval.multipliedBy(3);
    this.health =
        new LoopHealth("discovery", stuck.compareTo(MIN_STUCK) < 0 ? MIN_STUCK : stuck, clock);
  }

  /** A pass or a silence shorter than this is never reported as a stuck loop. */
  private static final Duration MIN_STUCK = Duration.ofMinutes(1);

  public Path root() {
    return root;
  }

  /** The latest pass; generation 0 until the first pass finished. */
  public DiscoverySnapshot current() {
    return current;
  }

  /** Mappings not yet unmapped, including retired ones a scrape still reads. */
  public int openMappings() {
    return mappings.openMappings();
  }

  /** Called after every pass, on the discovery thread. */
  public void addListener(Consumer<DiscoverySnapshot> listener) {
    listeners.add(listener);
  }

  /** Starts the watcher and the periodic rescan; the first pass runs immediately. */
  public synchronized void start() {
    if (executor != null) {
      return;
    }
    executor =
        Executors.newSingleThreadScheduledExecutor(
            r -> Thread.ofPlatform().daemon().name("vgpu-discovery").unstarted(r));
    watcher.start(root);
    var _ =
        executor.scheduleWithFixedDelay(
            this::safeRescan, 0, rescanInterval.toMillis(), TimeUnit.MILLISECONDS);
  }

  /** Asks for a pass soon (coalesces bursts of events into one pass). */
  public void requestRescan() {
    ScheduledExecutorService ex = executor;
    if (ex != null && rescanPending.compareAndSet(false, true)) {
      try {
        var _ =
            ex.schedule(
                () -> {
                  rescanPending.set(false);
                  safeRescan();
                },
                DEBOUNCE_MILLIS,
                TimeUnit.MILLISECONDS);
      } catch (java.util.concurrent.RejectedExecutionException e) {
        rescanPending.set(false);
      }
    }
  }

  private void safeRescan() {
    health.run(this::rescan);
  }

  /** Entries of the cache root the last pass left unread (over {@code maxContainers}). */
  public int skippedContainers() {
    return skippedContainers;
  }

  /** The rescan loop's health (readiness turns unready while it fails or is stuck). */
  public LoopHealth loopHealth() {
    return health;
  }

  /** One full pass. Synchronous; safe to call from tests without {@link #start()}. */
  public synchronized DiscoverySnapshot rescan() {
    if (closed) {
      return current;
    }
    Optional<String> rootProblem = Optional.empty();
    List<DiscoveredContainer> containers = new ArrayList<>();
    Set<Path> seenFiles = new HashSet<>();
    // (device, inode) of every file mapped this pass: a second name of one file (a hard link,
    // made to multiply one region's cost and series) is refused, so each file counts once.
    Set<Object> mappedInodes = new HashSet<>();
    Set<Path> seenDirs = new HashSet<>();
    Map<Path, Integer> excessNow = new HashMap<>();
    BasicFileAttributes rootAttrs = stat(root);
    if (rootAttrs == null || !rootAttrs.isDirectory()) {
      rootProblem = Optional.of("cache root " + root + " does not exist or is not a directory");
    } else {
      try (DirectoryStream<Path> dirs = Files.newDirectoryStream(root)) {
        watcher.watch(root);
        // The first maxContainers names only (bounded heap whatever the root holds), chosen in a
        // bounded max-heap as the listing streams by, then scanned in name order.
        PriorityQueue<Path> chosen = new PriorityQueue<>(Comparator.reverseOrder());
        int listed = 0;
        for (Path dir : dirs) {
          listed++;
          chosen.add(dir);
          if (chosen.size() > maxContainers) {
            chosen.poll();
          }
        }
        int skipped = listed - chosen.size();
        if (skipped > 0 && skipped != skippedContainers) {
          LOG.atWarn()
              .setMessage("container directories skipped")
              .addKeyValue("root", root)
              .addKeyValue("listed", listed)
              .addKeyValue("read", chosen.size())
              .log();
        }
        skippedContainers = skipped;
        List<Path> ordered = new ArrayList<>(chosen);
        ordered.sort(null);
        // A directory that stays keeps its key object from pass to pass, so the per-scrape
        // lookups keyed by it (label sets, fates) end at the identity check.
        Map<Path, ContainerKey> knownKeys = new HashMap<>();
        for (DiscoveredContainer c : current.containers()) {
          knownKeys.put(c.dir(), c.key());
        }
        for (Path dir : ordered) {
          scanContainerDir(dir, seenFiles, mappedInodes, excessNow, knownKeys)
              .ifPresent(containers::add);
          seenDirs.add(dir);
        }
      } catch (AccessDeniedException e) {
        rootProblem = Optional.of("cache root " + root + " is not readable (permission denied)");
      } catch (IOException | java.nio.file.DirectoryIteratorException e) {
        rootProblem = Optional.of("cache root " + root + " could not be listed: " + e);
      }
    }
    if (rootProblem.isPresent() && rootAttrs != null && rootAttrs.isDirectory()) {
      // Unreadable for now: keep what is mapped rather than flapping every series.
      return publish(rootProblem, current.containers());
    }
    mappings.retireUnseen(seenFiles);
    excessFiles = excessNow;
    watcher.forgetUnseen(root, seenDirs);
    containers.sort((a, b) -> a.key().compareTo(b.key()));
    return publish(rootProblem, containers);
  }

  private DiscoverySnapshot publish(
      Optional<String> rootProblem, List<DiscoveredContainer> containers) {
    logRootProblemChange(rootProblem);
    DiscoverySnapshot snap =
        new DiscoverySnapshot(++generation, clock.instant(), rootProblem, containers);
    current = snap;
    for (Consumer<DiscoverySnapshot> l : listeners) {
      try {
        l.accept(snap);
      } catch (RuntimeException e) {
        LOG.atWarn()
            .setMessage("discovery listener failed")
            .addKeyValue("error", e.toString())
            .log();
      }
    }
    return snap;
  }

  /**
   * Logs a cache-root problem when it appears or changes and once when it clears, not on every
   * pass: an operator whose --path.cache-root points nowhere sees why nothing is exported.
   */
  private void logRootProblemChange(Optional<String> rootProblem) {
    if (rootProblem.equals(lastRootProblem)) {
      return;
    }
    if (rootProblem.isPresent()) {
      LOG.atError()
          .setMessage("cache root unreadable: nothing is exported until it is")
          .addKeyValue("root", root)
          .addKeyValue("problem", rootProblem.get())
          .log();
    } else if (lastRootProblem.isPresent()) {
      LOG.atInfo().setMessage("cache root readable again").addKeyValue("root", root).log();
    }
    lastRootProblem = rootProblem;
  }

  private Optional<DiscoveredContainer> scanContainerDir(
      Path dir,
      Set<Path> seenFiles,
      Set<Object> mappedInodes,
      Map<Path, Integer> excessNow,
      Map<Path, ContainerKey> knownKeys) {
    String name = dir.getFileName().toString();
    BasicFileAttributes attrs = stat(dir);
    if (attrs == null || !attrs.isDirectory()) {
      // Symlinks (even to directories) and plain files are not container directories.
      reportOnce(
          name,
          attrs != null && attrs.isSymbolicLink() ? "symlink, not followed" : "not a directory");
      return Optional.empty();
    }
    Optional<ContainerKey> key =
        Optional.ofNullable(knownKeys.get(dir)).or(() -> ContainerKey.parse(name));
    if (key.isEmpty()) {
      reportOnce(name, "name is not <podUID>_<container>");
      return Optional.empty();
    }
    watcher.watch(dir);
    // The one bounded listing every reader shares: the first MAX_FILES_PER_CONTAINER names in
    // name order (so the same files stay mapped across passes), whatever the directory holds.
    TenantDirListing.Listing listing = TenantDirListing.of(dir);
    if (listing.excessCacheFiles() > 0) {
      excessNow.put(dir, countExcess(dir, listing.excessCacheFiles()));
    }
    List<DiscoveredFile> found = new ArrayList<>(listing.cacheFiles().size());
    for (Path file : listing.cacheFiles()) {
      seenFiles.add(file);
      found.add(mappings.scanFile(file, mappedInodes));
    }
    return Optional.of(
        new DiscoveredContainer(
            key.get(),
            dir,
            attrs.lastModifiedTime().toInstant(),
            found,
            readDegraded(dir, listing.sideFiles(), sideFiles)));
  }

  /**
   * libvgpu's {@code <cache>.degraded} side files named by the directory's {@link TenantDirListing}
   * (the first {@link #MAX_FILES_PER_CONTAINER} by name). Read on every pass: they are a few dozen
   * bytes and change without the cache file changing.
   */
  public static List<DegradedMark> readDegraded(
      Path dir, List<String> names, SideFileReader sideFiles) {
    List<DegradedMark> marks = new ArrayList<>();
    for (String name : names.subList(0, Math.min(names.size(), MAX_FILES_PER_CONTAINER))) {
      Path path = dir.resolve(name);
      switch (sideFiles.read(dir, name, DegradedMark.MAX_BYTES)) {
        case SideFileReader.Result.Missing m -> {}
        case SideFileReader.Result.Refused r -> marks.add(DegradedMark.malformed(path));
        case SideFileReader.Result.Content c -> {
          // libvgpu truncates, then writes the line: an empty file is a write in progress.
          if (c.bytes().length > 0) {
            marks.add(DegradedMark.parse(path, c.bytes()));
          }
        }
      }
    }
    return marks;
  }

  /**
   * Counts files left unmapped by the per-directory cap: the counter grows by how much a
   * directory's excess grew since its last pass (a directory's excess is a number, not a set of
   * names, so the bookkeeping is O(1) per directory whatever a tenant creates), and one line is
   * logged per growth, not one per file.
   */
  private int countExcess(Path dir, int excess) {
    Integer before = excessFiles.get(dir);
    int grew = excess - (before == null ? 0 : before);
    if (grew > 0) {
      errors.incrementTooManyFiles(grew);
      LOG.atWarn()
          .setMessage("cache files not mapped")
          .addKeyValue("dir", dir)
          .addKeyValue("files", excess)
          .addKeyValue("reason", ParseErrors.TOO_MANY_FILES)
          .log();
    }
    return excess;
  }

  private void reportOnce(String name, String why) {
    if (reportedBadDirs.add(name)) {
      LOG.atWarn()
          .setMessage("skipping entry in cache root")
          .addKeyValue("entry", name)
          .addKeyValue("reason", why)
          .log();
    }
  }

  /**
   * Deletes a container directory (stale-directory cleanup): its regular files and symlinks (links
   * themselves, never their targets), then the directory; then runs a pass.
   *
   * @return true when the directory is gone
   */
  public boolean removeDirectory(ContainerKey key) {
    Path dir = root.resolve(key.dirName());
    BasicFileAttributes attrs = stat(dir);
    if (attrs == null || !attrs.isDirectory()) {
      return attrs == null;
    }
    try (DirectoryStream<Path> entries = Files.newDirectoryStream(dir)) {
      for (Path p : entries) {
        BasicFileAttributes a = stat(p);
        if (a != null && !a.isDirectory()) {
          Files.deleteIfExists(p);
        }
      }
      Files.deleteIfExists(dir);
    } catch (IOException e) {
      LOG.atWarn()
          .setMessage("stale directory not removed")
          .addKeyValue("dir", dir)
          .addKeyValue("error", e.toString())
          .log();
      return false;
    }
    LOG.atInfo().setMessage("removed stale directory").addKeyValue("dir", dir).log();
    requestRescan();
    return true;
  }

  private static BasicFileAttributes stat(Path p) {
    return FileMappings.stat(p);
  }

  /** Stops the threads and unmaps everything (readers still holding a mapping finish first). */
  @Override
  public void close() {
    ScheduledExecutorService ex;
    synchronized (this) {
      closed = true;
      ex = executor;
      mappings.retireAll();
      current =
          new DiscoverySnapshot(++generation, clock.instant(), Optional.of("closed"), List.of());
    }
    if (ex != null) {
      ex.shutdownNow();
      try {
        ex.awaitTermination(5, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    watcher.close();
  }
}
