package io.vgpu.exporter.attribution;

import io.vgpu.exporter.discovery.ContainerKey;
import io.vgpu.exporter.node.ContainerState;
import io.vgpu.exporter.node.DeviceUsageSummary;
import io.vgpu.exporter.node.NodeState;
import io.vgpu.exporter.nvml.GpuSnapshot;
import io.vgpu.exporter.nvml.NvmlSnapshot;
import io.vgpu.exporter.nvml.UsageLedger;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.TreeMap;

/**
 * Usage accounting: integrates, pass by pass, what each container used of each GPU, so that a
 * container that bursts between two scrapes is still billed (see docs/usage-accounting.md).
 *
 * <ul>
 *   <li>SM busy: every per-process NVML sample the {@link UsageLedger} counted since the previous
 *       pass, given to the container the sample's host pid belongs to (by this pass's attribution,
 *       else the previous pass's, for a process that exited in between); samples of no container
 *       are the GPU's unattributed busy time.
 *   <li>Memory: the region's used and limit bytes, each held from one pass to the next (a left
 *       Riemann sum at the pass rate, not the scrape rate).
 *   <li>Energy: each GPU's energy counter increase over the pass, split by SM busy share: a
 *       container gets {@code E × busy / max(T, Σ busy)} where {@code T} is the time the readings
 *       span, so idle time and processes of no container stay unattributed. In integer millijoules,
 *       each share rounded down with its fraction carried to the container's later passes; what is
 *       left is unattributed, so {@code Σ containers + unattributed + expired == device} exactly.
 * </ul>
 *
 * <p>Lifecycle: counters start at 0 when a container-device is first seen, never reset while it is
 * seen, and are dropped {@code grace} after the last pass that saw it (its energy then moves to the
 * GPU's expired total, so conservation still holds); a container seen again after that starts anew.
 * While NVML is down nothing is drained: the NVML-based counters stop, memory goes on.
 *
 * <p>Not thread safe: one pass at a time (the attribution thread); {@link #latest()} is safe.
 */
public final class UsageAccountant {
  private final UsageLedger ledger;
  private final Duration grace;
  private final Map<EntryKey, Entry> entries = new TreeMap<>();
  private final Map<String, Gpu> gpus = new TreeMap<>();
  private Map<Integer, ContainerKey> previousOwners = Map.of();
  private Instant lastPass;
  private volatile UsageSnapshot latest;

  /**
   * @param ledger the sampler's ledger, drained once per pass
   * @param grace how long a container's series stay after the last pass that saw it
   */
  public UsageAccountant(UsageLedger ledger, Duration grace, Instant start) {
    this.ledger = Objects.requireNonNull(ledger, "ledger");
    this.grace = Objects.requireNonNull(grace, "grace");
    this.latest = UsageSnapshot.empty(start);
  }

  public UsageSnapshot latest() {
    return latest;
  }

  private record EntryKey(ContainerKey key, int index, String uuid)
      implements Comparable<EntryKey> {
    private static final Comparator<EntryKey> ORDER =
        Comparator.comparing((EntryKey k) -> k.key().podUid())
            .thenComparing(k -> k.key().containerName())
            .thenComparingInt(EntryKey::index)
            .thenComparing(EntryKey::uuid);

    @Override
    public int compareTo(EntryKey o) {
      return ORDER.compare(this, o);
    }
  }

  private static final class Entry {
    String namespace = "";
    String pod = "";
    long busy;
    double usedByteSeconds;
    double limitByteSeconds;
    long energy;
    double carry;
    long lastUsed;
    long lastLimit;
    Instant lastSeen;
    Optional<UnknownReason> unknown = Optional.empty();
  }

  private static final class Gpu {
    int index;
    String model = "";
    long device;
    long unattributed;
    long expired;
    long unattributedBusy;
    Optional<String> unknown = Optional.empty();
  }

  /**
   * One container-device as a pass sees it.
   *
   * @param unknown why its NVML usage cannot be attributed this pass, if so
   */
  public record Seen(
      ContainerKey key,
      String namespace,
      String pod,
      int index,
      String uuid,
      long usedBytes,
      long limitBytes,
      Optional<UnknownReason> unknown) {
    public Seen {
      Objects.requireNonNull(key, "key");
      Objects.requireNonNull(namespace, "namespace");
      Objects.requireNonNull(pod, "pod");
      Objects.requireNonNull(uuid, "uuid");
      Objects.requireNonNull(unknown, "unknown");
    }
  }

  /** One pass: drains the ledger and integrates this pass's node state and attribution. */
  public UsageSnapshot account(NodeState state, AttributionResult result, Instant now) {
    List<Seen> seen = new ArrayList<>();
    for (ContainerState c : state.containers()) {
      Optional<ContainerAttribution> a = result.container(c.key());
      for (DeviceUsageSummary d : c.devices()) {
        seen.add(
            new Seen(
                c.key(),
                c.namespace(),
                c.podName(),
                d.index(),
                d.uuid(),
                d.usedBytes(),
                d.limitBytes(),
                a.isEmpty()
                    ? Optional.of(UnknownReason.NOT_RECONCILED_YET)
                    : a.get().device(d.index(), d.uuid()).flatMap(DeviceAttribution::unknown)));
      }
    }
    Map<Integer, ContainerKey> owners = new HashMap<>();
    result.containers().forEach(a -> a.hostPids().forEach(pid -> owners.put(pid, a.key())));
    return account(seen, owners, result.nvml(), now);
  }

  /**
   * One pass from its parts.
   *
   * @param owners host pid to container, by this pass's attribution
   */
  public UsageSnapshot account(
      List<Seen> seen, Map<Integer, ContainerKey> owners, NvmlSnapshot nvml, Instant now) {
    Instant previousPass = lastPass;
    lastPass = now;
    Map<String, UsageLedger.Drained> drained = ledger.drain();
    Map<ContainerKey, Map<String, Entry>> byContainerUuid = new HashMap<>();
    see(seen, previousPass, now, byContainerUuid);
    // A process that exited since the previous pass still belongs to the container it did then.
    Map<Integer, ContainerKey> withPrevious = new HashMap<>(previousOwners);
    withPrevious.putAll(owners);
    previousOwners = Map.copyOf(owners);
    for (GpuSnapshot g : nvml.gpus()) {
      String uuid = g.identity().uuid();
      Gpu gpu = gpus.computeIfAbsent(uuid, u -> new Gpu());
      gpu.index = g.identity().index();
      gpu.model = g.identity().name();
      UsageLedger.Drained d = drained.get(uuid);
      gpu.unknown =
          !g.processUtilizationAvailable()
              ? Optional.of(UnknownReason.NVML_UNSUPPORTED.label())
              : d != null && d.energyMillijoules().isEmpty()
                  ? Optional.of("energy_unsupported")
                  : Optional.empty();
    }
    if (!nvml.status().up()) {
      gpus.values().forEach(g -> g.unknown = Optional.of(UnknownReason.NVML_UNAVAILABLE.label()));
    }
    new TreeMap<>(drained).forEach((uuid, d) -> split(uuid, d, withPrevious, byContainerUuid));
    expire(now);
    latest = snapshot(now);
    return latest;
  }

  private void see(
      List<Seen> seen,
      Instant previousPass,
      Instant now,
      Map<ContainerKey, Map<String, Entry>> byContainerUuid) {
    double dt =
        previousPass == null || now.isBefore(previousPass)
            ? 0
            : Duration.between(previousPass, now).toNanos() / 1e9;
    for (Seen x : seen) {
      EntryKey k = new EntryKey(x.key(), x.index(), x.uuid());
      Entry e = entries.computeIfAbsent(k, y -> new Entry());
      if (e.lastSeen != null && e.lastSeen.equals(previousPass)) {
        // held since the previous pass, which saw it too
        e.usedByteSeconds += e.lastUsed * dt;
        e.limitByteSeconds += e.lastLimit * dt;
      }
      e.lastUsed = x.usedBytes();
      e.lastLimit = x.limitBytes();
      e.lastSeen = now;
      e.namespace = x.namespace();
      e.pod = x.pod();
      e.unknown = x.unknown();
      if (!x.uuid().isEmpty()) {
        byContainerUuid
            .computeIfAbsent(x.key(), y -> new LinkedHashMap<>())
            .putIfAbsent(x.uuid(), e);
      }
    }
  }

  private void split(
      String uuid,
      UsageLedger.Drained d,
      Map<Integer, ContainerKey> owners,
      Map<ContainerKey, Map<String, Entry>> byContainerUuid) {
    Gpu gpu = gpus.computeIfAbsent(uuid, u -> new Gpu());
    Map<Entry, Long> busy = new LinkedHashMap<>();
    long total = 0;
    for (Map.Entry<Integer, Long> p : new TreeMap<>(d.busyPercentMicros()).entrySet()) {
      total += p.getValue();
      ContainerKey owner = owners.get(p.getKey());
      Entry e = owner == null ? null : byContainerUuid.getOrDefault(owner, Map.of()).get(uuid);
      if (e == null) {
        gpu.unattributedBusy += p.getValue();
      } else {
        e.busy += p.getValue();
        busy.merge(e, p.getValue(), Long::sum);
      }
    }
    if (d.energyMillijoules().isEmpty()) {
      return;
    }
    long energy = d.energyMillijoules().getAsLong();
    gpu.device += energy;
    long denominator = Math.max(d.energyMicros() * 100, total);
    long remaining = energy;
    if (denominator > 0) {
      for (Map.Entry<Entry, Long> b : busy.entrySet()) {
        long given = share(energy, b.getValue(), denominator, b.getKey());
        b.getKey().energy += given;
        remaining -= given;
      }
      // Carried fractions: whole millijoules they add up to are given while this pass has them.
      for (Entry e : busy.keySet()) {
        while (e.carry >= 1 && remaining > 0) {
          e.carry -= 1;
          e.energy++;
          remaining--;
        }
      }
    }
    gpu.unattributed += remaining;
  }

  /** {@code floor(energy × busy / denominator)}; the fraction goes to the entry's carry. */
  private static long share(long energy, long busy, long denominator, Entry e) {
    long hi = Math.multiplyHigh(energy, busy);
    long lo = energy * busy;
    if (hi == 0 && lo >= 0) {
      e.carry += (double) (lo % denominator) / denominator;
      return lo / denominator;
    }
    double exact = (double) energy * busy / denominator; // beyond 2^63: float precision suffices
    long given = (long) Math.floor(exact);
    e.carry += exact - given;
    return Math.min(given, energy);
  }

  private void expire(Instant now) {
    var it = entries.entrySet().iterator();
    while (it.hasNext()) {
      var x = it.next();
      Entry e = x.getValue();
      if (e.lastSeen.plus(grace).isBefore(now)) {
        Gpu gpu = gpus.computeIfAbsent(x.getKey().uuid(), u -> new Gpu());
        gpu.expired += e.energy;
        it.remove();
      }
    }
  }

  private UsageSnapshot snapshot(Instant now) {
    List<UsageSnapshot.ContainerUsage> cs = new ArrayList<>(entries.size());
    entries.forEach(
        (k, e) ->
            cs.add(
                new UsageSnapshot.ContainerUsage(
                    k.key(),
                    e.namespace,
                    e.pod,
                    k.index(),
                    k.uuid(),
                    e.busy,
                    e.usedByteSeconds,
                    e.limitByteSeconds,
                    e.energy,
                    e.lastSeen.equals(now),
                    e.unknown)));
    List<UsageSnapshot.GpuUsage> gs = new ArrayList<>(gpus.size());
    gpus.forEach(
        (uuid, g) ->
            gs.add(
                new UsageSnapshot.GpuUsage(
                    uuid,
                    g.index,
                    g.model,
                    g.device,
                    g.unattributed,
                    g.expired,
                    g.unattributedBusy,
                    g.unknown)));
    return new UsageSnapshot(now, cs, gs);
  }
}
