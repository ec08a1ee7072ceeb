package io.vgpu.exporter.node;

import io.vgpu.exporter.discovery.CacheDiscovery;
import io.vgpu.exporter.discovery.DiscoveredContainer;
import io.vgpu.exporter.discovery.DiscoveredFile;
import io.vgpu.exporter.discovery.DiscoverySnapshot;
import io.vgpu.exporter.discovery.MappedRegion;
import io.vgpu.exporter.k8s.ContainerMeta;
import io.vgpu.exporter.k8s.PodMeta;
import io.vgpu.exporter.k8s.PodMetadataSource;
import io.vgpu.exporter.k8s.SourceHealth;
import io.vgpu.regioncodec.DeviceHeader;
import io.vgpu.regioncodec.DeviceUsage;
import io.vgpu.regioncodec.ExtensionDevice;
import io.vgpu.regioncodec.ProcessSlot;
import io.vgpu.regioncodec.RegionException;
import io.vgpu.regioncodec.RegionExtension;
import io.vgpu.regioncodec.RegionSnapshot;
import java.time.Duration;
import java.time.Instant;
import java.time.InstantSource;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.function.Supplier;

/**
 * Builds the {@link NodeState} of a scrape: reads every mapped region once and joins pod metadata.
 * The metrics collector chain builds one per scrape and hands it to every collector, so a scrape
 * reads each region once however many collectors there are; this class keeps no state of a scrape.
 * Thread-safe.
 */
public final class NodeStateProvider {
  private final String node;
  private final Supplier<DiscoverySnapshot> discovery;
  private final PodMetadataSource metadata;
  private final InstantSource clock;
  private final Duration staleGrace;
  private final Supplier<SlotFates> slotFates;
  private final DeviceIdentities identities;

  public NodeStateProvider(
      String node,
      CacheDiscovery discovery,
      PodMetadataSource metadata,
      InstantSource clock,
      Duration staleGrace,
      Supplier<SlotFates> slotFates) {
    this(node, discovery::current, metadata, clock, staleGrace, slotFates);
  }

  /** Without an evidence pass: every slot is UNKNOWN ({@link SlotFates#NOT_JUDGED}). */
  public NodeStateProvider(
      String node,
      Supplier<DiscoverySnapshot> discovery,
      PodMetadataSource metadata,
      InstantSource clock,
      Duration staleGrace) {
    this(node, discovery, metadata, clock, staleGrace, () -> SlotFates.NOT_JUDGED);
  }

  /**
   * @param slotFates the latest evidence pass's slot liveness ({@link EvidencePass#fates}): the one
   *     judgment decides which slots are ALIVE, GONE or UNKNOWN; a GONE slot's memory leaves "used"
   *     and is counted as {@link DeviceUsageSummary#goneBytes}
   */
  public NodeStateProvider(
      String node,
      Supplier<DiscoverySnapshot> discovery,
      PodMetadataSource metadata,
      InstantSource clock,
      Duration staleGrace,
      Supplier<SlotFates> slotFates) {
    this(node, discovery, metadata, clock, staleGrace, slotFates, DeviceIdentities.withoutNvml());
  }

  /**
   * @param identities the device labels: NVML's identity, never a region's unchecked bytes
   */
  public NodeStateProvider(
      String node,
      Supplier<DiscoverySnapshot> discovery,
      PodMetadataSource metadata,
      InstantSource clock,
      Duration staleGrace,
      Supplier<SlotFates> slotFates,
      DeviceIdentities identities) {
    this.identities = Objects.requireNonNull(identities, "identities");
    this.slotFates = Objects.requireNonNull(slotFates, "slotFates");
    this.node = Objects.requireNonNull(node, "node");
    this.discovery = Objects.requireNonNull(discovery, "discovery");
    this.metadata = Objects.requireNonNull(metadata, "metadata");
    this.clock = Objects.requireNonNull(clock, "clock");
    this.staleGrace = Objects.requireNonNull(staleGrace, "staleGrace");
  }

  public String node() {
    return node;
  }

  public PodMetadataSource metadata() {
    return metadata;
  }

  /** A fresh state (reads every mapped region now); each call builds its own. */
  public NodeState build() {
    DiscoverySnapshot snap = discovery.get();
    SourceHealth health = metadata.health();
    Instant now = clock.instant();
    SlotFates fates = Objects.requireNonNull(slotFates.get(), "slot fates");
    List<ContainerState> containers = new ArrayList<>(snap.containers().size());
    DeviceIdentities.View ids = identities.view();
    java.util.Set<io.vgpu.exporter.discovery.ContainerKey> live = new java.util.HashSet<>();
    for (DiscoveredContainer dc : snap.containers()) {
      containers.add(container(dc, health, now, fates, ids));
      live.add(dc.key());
    }
    identities.retainOnly(live);
    return new NodeState(node, now, snap, health, metadata.node(), containers);
  }

  private ContainerState container(
      DiscoveredContainer dc,
      SourceHealth health,
      Instant now,
      SlotFates fates,
      DeviceIdentities.View ids) {
    Optional<PodMeta> pod = metadata.pod(dc.key().podUid());
    boolean stale =
        pod.isEmpty()
            && health.authoritative()
            && Duration.between(dc.modified(), now).compareTo(staleGrace) >= 0;
    boolean finished = pod.map(p -> finished(p, dc.key().containerName())).orElse(false);
    List<ContainerState.RegionState> regions = new ArrayList<>(dc.files().size());
    for (DiscoveredFile f : dc.files()) {
      MappedRegion.Read read =
          f.region()
              .map(MappedRegion::read)
              .orElseGet(
                  () ->
                      new MappedRegion.Read.Failed(
                          f.openError().orElse(RegionException.Reason.IO_ERROR)));
      regions.add(new ContainerState.RegionState(f.path(), f.region(), read));
    }
    List<Acc> accs = new ArrayList<>();
    long running = 0;
    long suspended = 0;
    long gone = 0;
    long unknown = 0;
    long lastKernel = 0;
    for (ContainerState.RegionState r : regions) {
      if (!(r.read() instanceof MappedRegion.Read.Ok(RegionSnapshot s))) {
        continue;
      }
      lastKernel = Math.max(lastKernel, s.lastKernelTimeEpochSeconds());
      Acc[] byIndex = new Acc[s.deviceCount()];
      for (DeviceHeader h : s.devices()) {
        // The label is NVML's identity (or a checked, stable region uuid), never the region's
        // bytes as written: rewriting them cannot mint series.
        DeviceIdentities.Identity id = ids.of(dc.key(), h.index(), h.uuid());
        Acc a = find(accs, h.index(), id.uuid());
        if (!id.confirmed()) {
          a.uuidRejected = id.rejected();
        }
        a.limit = Math.max(a.limit, h.memoryLimitBytes());
        a.smLimit = Math.max(a.smLimit, h.smLimitPercent());
        byIndex[h.index()] = a;
      }
      String file = r.path().getFileName() == null ? "" : r.path().getFileName().toString();
      for (ProcessSlot slot : s.processes()) {
        NodeEvidence.SlotFate fate = fates.fate(dc.key(), file, slot);
        if (fate == NodeEvidence.SlotFate.GONE) {
          // The judgment's GONE: its memory is held by nobody, so it leaves "used".
          gone++;
          for (DeviceUsage u : slot.devices()) {
            Acc a = byIndex[u.deviceIndex()];
            a.gone = sat(a.gone, u.totalBytes());
          }
          continue;
        }
        if (fate == NodeEvidence.SlotFate.UNKNOWN) {
          unknown++; // may be alive: its memory still counts as used (never under-report)
        } else if (slot.status() == ProcessSlot.STATUS_SUSPENDED) {
          suspended++;
        } else {
          running++;
        }
        for (DeviceUsage u : slot.devices()) {
          Acc a = byIndex[u.deviceIndex()];
          a.used = sat(a.used, u.totalBytes());
          a.context = sat(a.context, u.contextBytes());
          a.module = sat(a.module, u.moduleBytes());
          a.data = sat(a.data, u.dataBytes());
          a.monitor = sat(a.monitor, u.monitorUsedBytes());
          a.smUtil = sat(a.smUtil, u.smUtilPercent());
        }
      }
      if (s.extension().isPresent()) {
        RegionExtension ext = s.extension().get();
        for (ExtensionDevice d : ext.devices()) {
          if (d.index() < byIndex.length) {
            Acc a = byIndex[d.index()];
            a.ext = true;
            a.oom = sat(a.oom, d.oomRejections());
            a.throttled = sat(a.throttled, d.throttledNanos());
            a.delayed = sat(a.delayed, d.launchesDelayed());
            a.busy = sat(a.busy, d.busyNanos());
          }
        }
      }
    }
    List<DeviceUsageSummary> devices = new ArrayList<>(accs.size());
    if (!finished) {
      for (Acc a : accs) {
        devices.add(
            new DeviceUsageSummary(
                a.index,
                a.uuid,
                a.used,
                a.limit,
                a.context,
                a.module,
                a.data,
                a.monitor,
                a.smLimit,
                a.smUtil,
                a.ext,
                a.oom,
                a.throttled,
                a.delayed,
                a.gone,
                a.busy,
                a.uuidRejected));
      }
    }
    return new ContainerState(
        dc.key(),
        dc,
        pod,
        pod.map(PodMeta::namespace).orElse(""),
        pod.map(PodMeta::name).orElse(""),
        stale,
        finished,
        regions,
        devices,
        finished ? 0 : running,
        finished ? 0 : suspended,
        finished ? 0 : gone,
        finished ? 0 : unknown,
        lastKernel,
        DegradedPolicy.current(dc.degraded(), snapshots(regions), finished || stale));
  }

  private static List<RegionSnapshot> snapshots(List<ContainerState.RegionState> regions) {
    List<RegionSnapshot> out = new ArrayList<>(regions.size());
    for (ContainerState.RegionState r : regions) {
      if (r.read() instanceof MappedRegion.Read.Ok(RegionSnapshot s)) {
        out.add(s);
      }
    }
    return out;
  }

  /** Succeeded/Failed pods and completed init containers will not run again. */
  static boolean finished(PodMeta pod, String containerName) {
    if (pod.finished()) {
      return true;
    }
    return pod.container(containerName)
        .map(
            c -> c.kind() == ContainerMeta.Kind.INIT && c.state() == ContainerMeta.State.TERMINATED)
        .orElse(false);
  }

  private static Acc find(List<Acc> accs, int index, String uuid) {
    for (Acc a : accs) {
      if (a.index == index && a.uuid.equals(uuid)) {
        return a;
      }
    }
    Acc a = new Acc(index, uuid);
    accs.add(a);
    return a;
  }

  private static long sat(long a, long b) {
    long r = a + b;
    return r < 0 || b < 0 ? (b < 0 ? a : Long.MAX_VALUE) : r;
  }

  private static final class Acc {
    final int index;
    final String uuid;
    long used;
    long limit;
    long context;
    long module;
    long data;
    long monitor;
    int smLimit;
    long smUtil;
    boolean ext;
    long oom;
    long throttled;
    long delayed;
    long busy;
    long gone;
    String uuidRejected = "";

    Acc(int index, String uuid) {
      this.index = index;
      this.uuid = uuid;
    }
  }
}
