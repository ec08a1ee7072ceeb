package io.vgpu.exporter.nvml;

import java.time.Duration;
import java.time.Instant;
import java.time.InstantSource;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Polls NVML in the background so a scrape never waits on it.
 *
 * <p>NVML is loaded and initialised once; every {@code interval} the sampler enumerates the GPUs
 * (MIG devices included), reads memory, utilization, the running processes and the per-process
 * utilization samples newer than a per-GPU {@code lastSeenTimeStamp} cursor, and publishes an
 * immutable {@link NvmlSnapshot}. Per-process SM utilization is a time-weighted mean over {@code
 * window} (see {@link UtilizationWindow}), never a single instant sample. Each physical GPU's
 * health (power, temperature, clock event reasons, ECC, remapped rows: {@link DeviceHealthReader})
 * is read at every poll, and its XID events are drained from an NVML event set without waiting
 * ({@link XidEventWatcher}).
 *
 * <p>Failures: a failed query is counted by return code; a query one GPU does not support
 * (NOT_SUPPORTED) only leaves that value unknown. A code meaning NVML as a whole is unusable (no
 * driver 9, GPU lost 15, unknown 999, uninitialized 1, ...) takes the sampler down: it shuts NVML
 * down, publishes a snapshot without GPUs and with a reason, and re-initialises after a back-off
 * that doubles from {@code interval} up to {@code maxBackoff}. Consumers degrade to region-only
 * metrics meanwhile.
 *
 * <p>Thread safety: {@link #latest()} and the counters may be read from any thread; polling runs on
 * one daemon thread ({@link #start()}) or the caller of {@link #sampleOnce()}, never both.
 */
public final class NvmlSampler implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(NvmlSampler.class);

  /**
   * Sampler settings.
   *
   * @param interval time between polls (default 1 s)
   * @param window averaging window for utilization (default 5 s)
   * @param maxBackoff longest wait between re-initialisation attempts (default 60 s)
   */
  public record Settings(Duration interval, Duration window, Duration maxBackoff) {
    public Settings {
      requirePositive(interval, "interval");
      requirePositive(window, "window");
      requirePositive(maxBackoff, "maxBackoff");
    }

    public static Settings defaults() {
      return new Settings(Duration.ofSeconds(1), Duration.ofSeconds(5), Duration.ofSeconds(60));
    }

    private static void requirePositive(Duration d, String name) {
      if (d == null || d.isNegative() || d.isZero()) {
        throw new IllegalArgumentException(name + " must be a positive duration, got " + d);
      }
    }
  }

  private final Supplier<NvmlResult<NvmlClient>> loader;
  private final Settings settings;
  private final InstantSource clock;
  private final Map<Integer, LongAdder> errors = new ConcurrentHashMap<>();
  private final AtomicLong initAttempts = new AtomicLong();

  /**
   * NVML answers a per-process utilization query with each process's latest ~200 ms period only, so
   * samples are collected this often (when the poll interval is longer) to see every period.
   */
  public static final Duration SAMPLE_COLLECTION_INTERVAL = Duration.ofMillis(200);

  private final Map<String, UtilizationWindow> processWindows = new HashMap<>();

  /** Devices whose per-process samples the fast poll collects, by UUID; rebuilt by every poll. */
  private final Map<String, DeviceHandle> sampledDevices = new HashMap<>();

  private final Map<String, Deque<long[]>> deviceUtilization = new HashMap<>();

  /** Per device uuid, the newest of its own sampling ticks read: their lastSeenTimeStamp. */
  private final Map<String, Long> deviceTicksSeen = new HashMap<>();

  /** Every per-process sample and energy reading, for usage accounting (drained by its pass). */
  private final UsageLedger ledger;

  private final DeviceHealthReader healthReader = new DeviceHealthReader(this::countFailure);
  private final XidEventWatcher xids = new XidEventWatcher(this::count);
  private final MigReader migReader = new MigReader(this::count);

  private NvmlClient client;
  private boolean initialised;
  private boolean closed;
  private int consecutiveFailures;
  private Instant nextAttempt = Instant.MIN;
  private Optional<String> driverVersion = Optional.empty();
  private volatile NvmlSnapshot latest;
  private ScheduledExecutorService executor;

  /**
   * @param loader loads the library, e.g. {@code () -> JnaNvmlClient.load(path)}; called until it
   *     succeeds, with the same back-off as initialisation
   */
  public NvmlSampler(
      Supplier<NvmlResult<NvmlClient>> loader, Settings settings, InstantSource clock) {
    this.loader = Objects.requireNonNull(loader, "loader");
    this.settings = Objects.requireNonNull(settings, "settings");
    this.clock = Objects.requireNonNull(clock, "clock");
    this.latest = NvmlSnapshot.unavailable(clock.instant(), NvmlStatus.NOT_POLLED_YET);
    this.ledger = UsageLedger.estimating(collectionInterval());
  }

  /** What usage accounting drains: each sample once, and each GPU's energy. */
  public UsageLedger ledger() {
    return ledger;
  }

  /** The newest snapshot; never blocks. */
  public NvmlSnapshot latest() {
    return latest;
  }

  /**
   * Failed NVML calls so far by return code (sorted), for {@code vgpu_exporter_nvml_errors_total}.
   */
  public Map<NvmlReturn, Long> errorCounts() {
    Map<NvmlReturn, Long> out = new TreeMap<>((a, b) -> Integer.compare(a.code(), b.code()));
    errors.forEach((code, n) -> out.put(new NvmlReturn(code), n.sum()));
    return out;
  }

  /**
   * XID events NVML delivered for a device handle that was no registered GPU. Never blocks: a
   * scrape reads it while a poll may hold the sampler.
   */
  public long unmatchedXidEvents() {
    return xids.unmatchedEvents();
  }

  /** How often initialisation (library load included) was attempted. */
  public long initAttempts() {
    return initAttempts.get();
  }

  /** Time of the next re-initialisation attempt while down. */
  public synchronized Instant nextAttempt() {
    return nextAttempt;
  }

  /** Starts polling on a daemon thread, the first poll at once. Idempotent. */
  public synchronized void start() {
    if (executor != null) {
      return;
    }
    executor =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "nvml-sampler");
              t.setDaemon(true);
              return t;
            });
    long period = settings.interval().toNanos();
    var _ = executor.scheduleWithFixedDelay(this::safePoll, 0, period, TimeUnit.NANOSECONDS);
    long collect = collectionInterval().toNanos();
    if (collect < period) {
      var _ =
          executor.scheduleWithFixedDelay(
              this::safeCollect, collect, collect, TimeUnit.NANOSECONDS);
    }
  }

  private void safePoll() {
    try {
      sampleOnce();
    } catch (Throwable e) {
      // A JNA or driver surprise, or an Error such as OutOfMemoryError, must not end the periodic
      // poll (an executor drops a task that throws): treat it as an unknown error.
      LOG.atWarn().setMessage("NVML poll failed unexpectedly").setCause(e).log();
      synchronized (this) {
        count(NvmlReturn.UNKNOWN);
        goDown(clock.instant(), "poll", NvmlReturn.UNKNOWN);
      }
    }
  }

  private Duration collectionInterval() {
    return settings.interval().compareTo(SAMPLE_COLLECTION_INTERVAL) < 0
        ? settings.interval()
        : SAMPLE_COLLECTION_INTERVAL;
  }

  private void safeCollect() {
    try {
      collectProcessSamples();
    } catch (Throwable e) { // as safePoll: nothing may end the periodic collection
      LOG.atDebug()
          .setMessage("collecting NVML process samples failed; the next poll reports it")
          .setCause(e)
          .log();
    }
  }

  /**
   * Between polls: adds each device's new per-process samples to its window, so every NVML sample
   * period is seen even with a long poll interval. Errors are left for the next poll to count.
   */
  public synchronized void collectProcessSamples() {
    if (!initialised) {
      return;
    }
    sampledDevices.forEach(
        (uuid, h) -> {
          UtilizationWindow window = processWindows.get(uuid);
          if (window != null) {
            feedDeviceTicks(uuid, h, false);
          }
          if (window != null
              && client.processUtilization(h, window.lastSeenMicros())
                  instanceof NvmlResult.Ok<List<ProcessSample>> ok) {
            window.add(ok.value());
            ledger.addSamples(uuid, ok.value());
          }
        });
  }

  /** One poll (or one re-initialisation attempt when down and the back-off has passed). */
  public synchronized void sampleOnce() {
    if (closed) {
      return; // a poll that was waiting for close() must not initialise NVML again
    }
    Instant now = clock.instant();
    if (!initialised) {
      if (now.isBefore(nextAttempt)) {
        return;
      }
      initAttempts.incrementAndGet();
      if (client == null) {
        NvmlResult<NvmlClient> loaded = loader.get();
        if (loaded instanceof NvmlResult.Err<NvmlClient> err) {
          count(err.code());
          goDown(now, err.function(), err.code());
          return;
        }
        client = loaded.orElse(null);
      }
      NvmlReturn init = client.init();
      if (!init.isSuccess()) {
        count(init);
        goDown(now, "nvmlInit_v2", init);
        return;
      }
      initialised = true;
      driverVersion = Optional.ofNullable(client.driverVersion().orElse(null));
    }
    poll(now);
  }

  private void poll(Instant now) {
    NvmlResult<Integer> count = client.deviceCount();
    if (!(count instanceof NvmlResult.Ok<Integer> n)) {
      NvmlResult.Err<Integer> err = (NvmlResult.Err<Integer>) count;
      count(err.code());
      goDown(now, err.function(), err.code());
      return;
    }
    List<GpuSnapshot> gpus = new ArrayList<>();
    sampledDevices.clear();
    migReader.beginPoll();
    NvmlResult.Err<?> fatal = null;
    for (int i = 0; i < n.value(); i++) {
      NvmlResult<DeviceHandle> handle = client.deviceHandle(i);
      if (handle instanceof NvmlResult.Err<DeviceHandle> err) {
        count(err.code());
        fatal = err.code().needsReinit() ? err : fatal;
        continue;
      }
      DeviceHandle h = handle.orElse(null);
      int parentAt = gpus.size();
      NvmlResult<?> polled = pollDevice(h, now, gpus);
      if (polled instanceof NvmlResult.Err<?> err && err.code().needsReinit()) {
        fatal = err;
      }
      NvmlResult<List<DeviceHandle>> migs = client.migDevices(h);
      switch (migs) {
        case NvmlResult.Ok<List<DeviceHandle>> ok -> pollMigs(h, ok.value(), parentAt, now, gpus);
        case NvmlResult.Err<List<DeviceHandle>> err -> count(err.code());
      }
    }
    migReader.endPoll(client);
    boolean allLost = fatal != null && gpus.isEmpty();
    boolean driverGone =
        fatal != null && !fatal.code().equals(NvmlReturn.GPU_IS_LOST) && !fatal.code().isSuccess();
    if (allLost || driverGone) {
      goDown(now, fatal.function(), fatal.code());
      return;
    }
    xids.drain(client);
    if (!latest.status().up()) {
      LOG.atInfo()
          .setMessage("NVML up")
          .addKeyValue("driver", driverVersion.orElse("?"))
          .addKeyValue("gpus", gpus.size())
          .log();
    }
    consecutiveFailures = 0;
    latest = new NvmlSnapshot(now, NvmlStatus.up(driverVersion), xids.attach(gpus));
  }

  /**
   * Polls the MIG devices of the GPU at {@code parentAt} in {@code out} (absent when its own poll
   * failed) into {@code out}, each with its {@link MigInstance}, and takes their processes off the
   * parent's aggregate list.
   */
  private void pollMigs(
      DeviceHandle parent,
      List<DeviceHandle> migs,
      int parentAt,
      Instant now,
      List<GpuSnapshot> out) {
    if (parentAt >= out.size() || migs.isEmpty()) {
      return; // without the parent's UUID its MIG devices cannot be told apart from GPUs
    }
    GpuSnapshot parentSnapshot = out.get(parentAt);
    String parentUuid = parentSnapshot.identity().uuid();
    java.util.Set<Integer> migPids = new java.util.HashSet<>();
    for (DeviceHandle m : migs) {
      int at = out.size();
      pollDevice(m, now, out);
      if (at < out.size()) {
        GpuSnapshot g = out.get(at);
        g.processes().ifPresent(ps -> ps.forEach(p -> migPids.add(p.pid())));
        out.set(at, g.withMig(migReader.read(client, parent, parentUuid, m, g.identity().name())));
      }
    }
    out.set(parentAt, parentSnapshot.withoutProcesses(migPids));
  }

  /** Polls one device into {@code out}; returns the identity failure, if any. */
  private NvmlResult<?> pollDevice(DeviceHandle h, Instant now, List<GpuSnapshot> out) {
    NvmlResult<GpuIdentity> identity = client.identity(h);
    if (!(identity instanceof NvmlResult.Ok<GpuIdentity> id)) {
      countFailure(identity);
      return identity;
    }
    String uuid = id.value().uuid();
    DeviceHealth health = DeviceHealth.NONE;
    if (!h.isMig()) { // MIG handles have none of these; their parent's reading covers them
      health = healthReader.read(client, h);
      xids.register(client, h, uuid);
    }
    Optional<MemoryInfo> memory = value(client.memory(h));
    Optional<Utilization> util = value(client.utilization(h));
    Optional<List<RunningProcess>> processes = value(client.runningProcesses(h));
    long nowMicros = now.getEpochSecond() * 1_000_000 + now.getNano() / 1000;
    value(client.totalEnergyMillijoules(h)).ifPresent(mj -> ledger.energy(uuid, mj, nowMicros));

    UtilizationWindow window =
        processWindows.computeIfAbsent(
            uuid, u -> new UtilizationWindow(settings.window(), collectionInterval()));
    Optional<Map<Integer, Double>> perPid;
    feedDeviceTicks(uuid, h, true);
    NvmlResult<List<ProcessSample>> samples = client.processUtilization(h, window.lastSeenMicros());
    if (samples instanceof NvmlResult.Ok<List<ProcessSample>> ok) {
      window.add(ok.value());
      ledger.addSamples(uuid, ok.value());
      sampledDevices.put(uuid, h);
      perPid = Optional.of(window.averages(nowMicros));
    } else {
      countFailure(samples);
      perPid = Optional.empty();
    }

    OptionalDouble deviceRatio = OptionalDouble.empty();
    if (util.isPresent()) {
      deviceRatio = averageDeviceUtilization(uuid, nowMicros, util.get().gpuPercent());
    }
    out.add(
        new GpuSnapshot(
            id.value(),
            memory,
            deviceRatio,
            util.map(u -> OptionalDouble.of(u.memoryPercent() / 100.0))
                .orElse(OptionalDouble.empty()),
            processes,
            perPid,
            health));
    return identity;
  }

  /**
   * Gives the ledger the GPU's own sampling ticks newer than those read before (the period its
   * per-process samples are credited by; see {@link UsageLedger#addDeviceTicks}), ahead of the
   * per-process samples of the same read. A driver or device without them leaves the ledger on its
   * fallback; other failures are counted when {@code countFailures} (polls, not collections).
   */
  private void feedDeviceTicks(String uuid, DeviceHandle h, boolean countFailures) {
    NvmlResult<List<Long>> ticks =
        client.utilizationSampleTimes(h, deviceTicksSeen.getOrDefault(uuid, 0L));
    if (ticks instanceof NvmlResult.Ok<List<Long>> ok) {
      if (!ok.value().isEmpty()) {
        deviceTicksSeen.merge(uuid, java.util.Collections.max(ok.value()), Math::max);
        ledger.addDeviceTicks(uuid, ok.value());
      }
    } else if (countFailures
        && ticks instanceof NvmlResult.Err<List<Long>> err
        && !err.code().equals(NvmlReturn.FUNCTION_NOT_FOUND)) {
      countFailure(err);
    }
  }

  private OptionalDouble averageDeviceUtilization(String uuid, long nowMicros, int percent) {
    Deque<long[]> q = deviceUtilization.computeIfAbsent(uuid, u -> new ArrayDeque<>());
    q.addLast(new long[] {nowMicros, percent});
    long start = nowMicros - settings.window().toNanos() / 1000;
    while (q.size() > 1 && q.peekFirst()[0] <= start) {
      q.pollFirst();
    }
    return OptionalDouble.of(q.stream().mapToLong(e -> e[1]).average().orElse(0) / 100.0);
  }

  private <T> Optional<T> value(NvmlResult<T> r) {
    countFailure(r);
    return r instanceof NvmlResult.Ok<T> ok ? Optional.of(ok.value()) : Optional.empty();
  }

  private void countFailure(NvmlResult<?> r) {
    if (r instanceof NvmlResult.Err<?> err && !err.code().equals(NvmlReturn.NOT_SUPPORTED)) {
      count(err.code());
    }
  }

  private void count(NvmlReturn code) {
    errors.computeIfAbsent(code.code(), c -> new LongAdder()).increment();
  }

  private void goDown(Instant now, String function, NvmlReturn code) {
    if (initialised && client != null) {
      xids.close(client);
      migReader.close(client);
      client.shutdown();
    }
    initialised = false;
    processWindows.clear();
    sampledDevices.clear();
    deviceTicksSeen.clear();
    ledger.lost();
    deviceUtilization.clear();
    consecutiveFailures++;
    long shift = Math.min(consecutiveFailures - 1, 20);
    Duration backoff = settings.interval().multipliedBy(1L << shift);
    if (backoff.compareTo(settings.maxBackoff()) > 0) {
      backoff = settings.maxBackoff();
    }
    nextAttempt = now.plus(backoff);
    String reason =
        "nvml: " + function + " returned " + code + ", retrying in " + backoff.toMillis() + " ms";
    if (latest.status().up() || consecutiveFailures == 1) {
      LOG.atWarn()
          .setMessage("NVML down, exporting region-only metrics")
          .addKeyValue("reason", reason)
          .log();
    }
    latest = new NvmlSnapshot(now, NvmlStatus.down(reason, Optional.of(code)), List.of());
  }

  /** Stops polling and shuts NVML down. */
  @Override
  public synchronized void close() {
    closed = true;
    if (executor != null) {
      executor.shutdownNow();
      executor = null;
    }
    if (initialised && client != null) {
      xids.close(client);
      migReader.close(client);
      client.shutdown();
    }
    initialised = false;
    if (client != null) {
      client.close();
    }
  }
}
