package io.vgpu.exporter.attribution;

import io.vgpu.exporter.discovery.ContainerKey;
import io.vgpu.exporter.discovery.MappedRegion;
import io.vgpu.exporter.loops.LoopHealth;
import io.vgpu.exporter.node.ContainerState;
import io.vgpu.exporter.node.NodeState;
import io.vgpu.exporter.nvml.GpuSnapshot;
import io.vgpu.exporter.nvml.NvmlSnapshot;
import io.vgpu.hostpid.HostPidResolver;
import io.vgpu.regioncodec.DeviceHeader;
import io.vgpu.regioncodec.RegionSnapshot;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.time.InstantSource;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.Set;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

/**
 * Runs attribution in the background: every {@code interval} it reads the node's regions (through
 * the exporter's {@link NodeState}), takes the latest NVML snapshot, reconciles, and publishes an
 * immutable {@link AttributionResult}; every {@code feedbackInterval} it runs HAMi's feedback loop
 * when enabled; after each reconciliation it repairs wrong hostpids when enabled. Scrapes read the
 * latest result only, so they never wait on /proc scans, NVML or writes.
 *
 * <p>It also feeds the rest of the exporter the reconciled utilization per container and device
 * ({@link #smUtilization}). Slot liveness in the metrics is not its rule: it is the one judgment's
 * (the node's evidence pass), the same as every other surface.
 *
 * <p>Thread safety: {@link #latest()}, {@link #smUtilization} and {@link #regionWrites()} are safe
 * from any thread; {@link #runOnce()} runs on one thread at a time.
 */
public final class AttributionService implements AutoCloseable {

  /**
   * @param interval time between reconciliations (default 2 s)
   * @param feedbackInterval time between feedback-loop passes (HAMi: 5 s)
   * @param feedback HAMi parity: priority blocking and utilization switch writes (default on)
   * @param repairHostPids write resolved host pids into slots whose hostpid is wrong (default off)
   * @param reconciler reconciliation settings
   */
  public record Settings(
      Duration interval,
      Duration feedbackInterval,
      boolean feedback,
      boolean repairHostPids,
      Reconciler.Settings reconciler) {
    public Settings {
      Objects.requireNonNull(interval, "interval");
      Objects.requireNonNull(feedbackInterval, "feedbackInterval");
      Objects.requireNonNull(reconciler, "reconciler");
      if (interval.isNegative() || interval.isZero() || feedbackInterval.isNegative()) {
        throw new IllegalArgumentException("intervals must be positive");
      }
    }

    public static Settings defaults() {
      return new Settings(
          Duration.ofSeconds(2),
          Duration.ofSeconds(5),
          true,
          false,
          Reconciler.Settings.defaults());
    }

    public boolean writes() {
      return feedback || repairHostPids;
    }
  }

  private final Supplier<NvmlSnapshot> nvml;
  private final HostPidResolver pids;
  private final Settings settings;
  private final InstantSource clock;
  private final LoopHealth health;
  private final Reconciler reconciler;
  private final RegionWriteBack writeBack;
  private final Supplier<NodeState> states;
  private final Optional<UsageAccountant> usage;
  private volatile AttributionResult latest;

  private Instant lastFeedback = Instant.MIN;
  private ScheduledExecutorService executor;

  /**
   * @param nvml the latest NVML snapshot, e.g. {@code sampler::latest}, or a constant {@link
   *     NvmlSnapshot#unavailable} when NVML is disabled
   * @param states the node's regions and pods, read once per pass (e.g. {@code
   *     NodeStateProvider::build})
   */
  public AttributionService(
      Supplier<NvmlSnapshot> nvml,
      HostPidResolver pids,
      Settings settings,
      InstantSource clock,
      Supplier<NodeState> states) {
    this(nvml, pids, settings, clock, states, Optional.empty());
  }

  /**
   * As above, with usage accounting: {@code usage} integrates each pass (after reconciliation, from
   * the same node state).
   */
  public AttributionService(
      Supplier<NvmlSnapshot> nvml,
      HostPidResolver pids,
      Settings settings,
      InstantSource clock,
      Supplier<NodeState> states,
      Optional<UsageAccountant> usage) {
    this.usage = Objects.requireNonNull(usage, "usage");
    this.nvml = Objects.requireNonNull(nvml, "nvml");
    this.states = Objects.requireNonNull(states, "states");
    this.pids = Objects.requireNonNull(pids, "pids");
    this.settings = Objects.requireNonNull(settings, "settings");
    this.clock = Objects.requireNonNull(clock, "clock");
    Duration stuck = settings.interval().multipliedBy(3);
    this.health =
        new LoopHealth(
            "attribution",
            stuck.compareTo(Duration.ofMinutes(1)) < 0 ? Duration.ofMinutes(1) : stuck,
            clock);
    this.reconciler = new Reconciler(settings.reconciler());
    this.writeBack = settings.writes() ? new RegionWriteBack() : null;
    this.latest = AttributionResult.empty(clock.instant());
  }

  public Settings settings() {
    return settings;
  }

  public AttributionResult latest() {
    return latest;
  }

  /** Usage accounting, when on. */
  public Optional<UsageAccountant> usage() {
    return usage;
  }

  /**
   * The reconciled SM utilization (0-1) of one container on one device; empty when it is unknown
   * (no NVML, no pass yet, or the container's processes were not seen on the GPU).
   */
  public OptionalDouble smUtilization(ContainerKey container, int deviceIndex, String deviceUuid) {
    // The index and branches, not an Optional chain of capturing lambdas: asked per container
    // and device every scrape.
    ContainerAttribution a = latest.byKey().get(container);
    if (a == null) {
      return OptionalDouble.empty();
    }
    Optional<DeviceAttribution> d = a.device(deviceIndex, deviceUuid);
    return d.isEmpty() ? OptionalDouble.empty() : d.get().smUtilization();
  }

  /** Region writes so far by field; zeros when no write flag is on. */
  public Map<String, Long> regionWrites() {
    return writeBack == null
        ? Map.of(
            RegionWriteBack.RECENT_KERNEL, 0L,
            RegionWriteBack.UTILIZATION_SWITCH, 0L,
            RegionWriteBack.HOSTPID, 0L)
        : writeBack.writes();
  }

  /** Failed region writes so far by reason; empty when no write flag is on. */
  public Map<String, Long> regionWriteErrors() {
    return writeBack == null ? Map.of() : writeBack.writeErrors();
  }

  /** Regions whose latest write failed, with the reason; empty without write flags. */
  public Map<Path, String> failingRegionWrites() {
    return writeBack == null ? Map.of() : writeBack.failing();
  }

  /** Starts the background loop (start the NVML sampler first). Idempotent. */
  public synchronized void start() {
    if (executor != null) {
      return;
    }
    executor =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "vgpu-attribution");
              t.setDaemon(true);
              return t;
            });
    var _ =
        executor.scheduleWithFixedDelay(
            () -> health.run(this::runOnce),
            0,
            settings.interval().toNanos(),
            TimeUnit.NANOSECONDS);
  }

  /**
   * The attribution loop's health: every pass runs under it, so nothing a pass throws (a fault in a
   * mapped region, an OutOfMemoryError) ends the periodic task, and readiness names the failure.
   */
  public LoopHealth loopHealth() {
    return health;
  }

  /** One pass: reconcile, feedback when due, repairs. */
  public synchronized void runOnce() {
    NodeState state = states.get();
    Instant now = clock.instant();
    List<ContainerInput> inputs = state.containers().stream().map(ContainerInput::of).toList();
    AttributionResult result =
        reconciler.reconcile(inputs, nvml.get(), pids, latest.history(), now);
    latest = result;
    if (usage.isPresent()) {
      usage.get().account(state, result, now);
    }

    if (writeBack == null) {
      return;
    }
    Set<Path> live = new LinkedHashSet<>();
    state.containers().forEach(c -> c.regions().forEach(r -> live.add(r.path())));
    writeBack.retainOnly(live);
    // Without a polled NVML no region's GPUs can be confirmed (see feedbackInputs): the pass waits
    // for NVML rather than treat every region as alone on its GPU (which would switch SM limits
    // off). HAMi's monitor would run; this is the fail-safe side.
    if (settings.feedback()
        && result.nvml().status().up()
        && !now.isBefore(lastFeedback.plus(settings.feedbackInterval()))) {
      lastFeedback = now;
      Map<Path, Set<Integer>> liveByRegion = liveHostPidsByRegion(result);
      for (FeedbackLoop.Decision d : FeedbackLoop.decide(feedbackInputs(state, result))) {
        writeBack.apply(d, "feedback", owners(liveByRegion.getOrDefault(d.region(), Set.of())));
      }
    }
    if (settings.repairHostPids()) {
      repair(result);
    }
  }

  /**
   * The regions the feedback loop may act on, as it may see them. Unlike HAMi's monitor, which
   * takes every region at its word, a region takes part only when one of its slots resolved to a
   * live process of the region's own pod (the resolver never crosses pods), and it claims only the
   * GPUs NVML shows a process of its own container on. A region of no live process (a forged file,
   * a dead pod's leftovers) is neither written nor counted; a uuid the tenant copied from a
   * neighbour's GPU is dropped, so it can neither block that neighbour nor be blocked there. {@link
   * #runOnce} runs the loop only while NVML is up.
   */
  static List<FeedbackLoop.Input> feedbackInputs(NodeState state, AttributionResult result) {
    Map<Path, Set<Integer>> live = liveHostPidsByRegion(result);
    Map<Integer, Set<String>> gpusOfPid = new HashMap<>();
    for (GpuSnapshot g : result.nvml().gpus()) {
      String uuid = g.identity().uuid();
      g.processes()
          .ifPresent(
              ps ->
                  ps.forEach(
                      p -> gpusOfPid.computeIfAbsent(p.pid(), k -> new HashSet<>()).add(uuid)));
      g.smUtilizationByPid()
          .ifPresent(
              m ->
                  m.keySet()
                      .forEach(
                          pid -> gpusOfPid.computeIfAbsent(pid, k -> new HashSet<>()).add(uuid)));
    }
    Map<ContainerKey, List<Integer>> containerPids = new HashMap<>();
    result.containers().forEach(c -> containerPids.put(c.key(), c.hostPids()));
    List<FeedbackLoop.Input> inputs = new ArrayList<>();
    for (ContainerState c : state.containers()) {
      Set<String> containerGpus = new HashSet<>();
      for (int pid : containerPids.getOrDefault(c.key(), List.of())) {
        containerGpus.addAll(gpusOfPid.getOrDefault(pid, Set.of()));
      }
      for (ContainerState.RegionState r : c.regions()) {
        if (r.read() instanceof MappedRegion.Read.Ok(RegionSnapshot s)
            && !live.getOrDefault(r.path(), Set.of()).isEmpty()) {
          Set<String> uuids = new LinkedHashSet<>();
          for (DeviceHeader h : s.devices()) {
            if (!h.uuid().isEmpty() && containerGpus.contains(h.uuid())) {
              uuids.add(h.uuid());
            }
          }
          inputs.add(
              new FeedbackLoop.Input(
                  r.path(), s.priority(), s.recentKernel(), s.utilizationSwitch(), uuids));
        }
      }
    }
    return inputs;
  }

  /** Per region, the host pids its slots resolved to (live processes of its own pod). */
  static Map<Path, Set<Integer>> liveHostPidsByRegion(AttributionResult result) {
    Map<Path, Set<Integer>> out = new HashMap<>();
    for (ContainerAttribution c : result.containers()) {
      for (SlotVerdict v : c.slots()) {
        v.hostPid().ifPresent(h -> out.computeIfAbsent(v.region(), k -> new HashSet<>()).add(h));
      }
    }
    return out;
  }

  /**
   * The users a region written back may belong to: the real, effective, saved and file-system uids
   * of its live processes (libvgpu creates it as one of them). Empty when none could be read (then
   * only the link count is checked).
   */
  private Set<Integer> owners(Set<Integer> hostPids) {
    Set<Integer> out = new HashSet<>();
    for (int pid : hostPids) {
      out.addAll(pids.procFs().readUids(pid)); // gone or unreadable: that process names no owner
    }
    return out;
  }

  private void repair(AttributionResult result) {
    for (ContainerAttribution c : result.containers()) {
      for (SlotVerdict v : c.slots()) {
        if (v.mismatch().isPresent() && v.hostPid().isPresent()) {
          writeBack.repairHostPid(v.region(), v.pid(), v.hostPid().getAsInt(), "hostpid-repair");
        }
      }
    }
  }

  /** The number of read-write mappings held (0 without write flags). */
  public int writableMappings() {
    return writeBack == null ? 0 : writeBack.mapped();
  }

  @Override
  public synchronized void close() {
    if (executor != null) {
      executor.shutdownNow();
      executor = null;
    }
    if (writeBack != null) {
      writeBack.close();
    }
  }
}
