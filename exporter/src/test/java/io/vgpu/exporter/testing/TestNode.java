package io.vgpu.exporter.testing;

import static io.vgpu.exporter.testing.TestRegions.spec;
import static io.vgpu.exporter.testing.TestRegions.write;

import io.prometheus.metrics.expositionformats.PrometheusTextFormatWriter;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import io.vgpu.exporter.config.ExporterConfig;
import io.vgpu.exporter.discovery.CacheDiscovery;
import io.vgpu.exporter.discovery.ParseErrors;
import io.vgpu.exporter.k8s.ContainerMeta;
import io.vgpu.exporter.k8s.NodeMeta;
import io.vgpu.exporter.k8s.PodMeta;
import io.vgpu.exporter.k8s.PodMetadataSource;
import io.vgpu.exporter.k8s.StaticMetadataSource;
import io.vgpu.exporter.metrics.BuildInfo;
import io.vgpu.exporter.metrics.CollectorContext;
import io.vgpu.exporter.metrics.CollectorStats;
import io.vgpu.exporter.metrics.Collectors;
import io.vgpu.exporter.node.NodeStateProvider;
import io.vgpu.hostpid.testing.ProcEntry;
import io.vgpu.hostpid.testing.ProcTree;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.time.InstantSource;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.Set;

/**
 * A standard node for collector tests: two running pods (one with libvgpu's extension), a Succeeded
 * pod, and a directory whose pod is unknown.
 */
public final class TestNode implements AutoCloseable {
  public static final String UID_TRAIN = "11111111-1111-4111-8111-111111111111";
  public static final String UID_SERVE = "22222222-2222-4222-8222-222222222222";
  public static final String UID_DONE = "33333333-3333-4333-8333-333333333333";
  public static final String UID_GONE = "44444444-4444-4444-8444-444444444444";

  /** Fixed scrape time: 2027-01-15T08:00:00Z. */
  public static final Instant NOW = Instant.ofEpochSecond(1_800_000_000L);

  /** Collectors this module owns (other layers add theirs to Collectors.ALL). */
  public static final Set<String> OWN_COLLECTORS =
      Set.of("region", "container", "node", "hami", "exporter");

  public final Path root;
  public final CacheDiscovery discovery;
  public final ParseErrors errors = new ParseErrors();
  public final StaticMetadataSource metadata;
  public final NodeStateProvider states;

  public TestNode(Path root) throws IOException {
    this.root = root;
    write(
        root,
        UID_TRAIN,
        "trainer",
        "a.cache",
        spec(2, 4096, 30, new int[] {10, 11}, 512, 20, true));
    write(root, UID_SERVE, "server", "b.cache", spec(1, 2048, 0, new int[] {20}, 1000, 55, false));
    write(root, UID_DONE, "job", "c.cache", spec(1, 1024, 50, new int[] {30}, 100, 0, false));
    write(root, UID_GONE, "main", "d.cache", spec(1, 1024, 50, new int[] {40}, 64, 0, false));
    metadata =
        StaticMetadataSource.of(
            List.of(
                pod(UID_TRAIN, "ml", "train-0", "Running", "trainer"),
                pod(UID_SERVE, "inference", "serve-1", "Running", "server"),
                pod(UID_DONE, "ml", "prep-done", "Succeeded", "job")),
            new NodeMeta(
                true,
                Optional.of(NOW.minusSeconds(42)),
                Optional.of("Reported_x"),
                OptionalInt.of(8),
                true));
    discovery =
        new CacheDiscovery(root, Duration.ofHours(1), InstantSource.fixed(NOW), false, errors);
    discovery.rescan();
    states =
        new NodeStateProvider(
            "node-a",
            discovery::current,
            metadata,
            InstantSource.fixed(NOW),
            Duration.ofMinutes(5));
  }

  public static PodMeta pod(String uid, String ns, String name, String phase, String ctr) {
    return new PodMeta(
        uid,
        ns,
        name,
        phase,
        Optional.of("burstable"),
        Map.of("app", name),
        Map.of(
            ctr,
            new ContainerMeta(
                ctr,
                ContainerMeta.Kind.REGULAR,
                Optional.of("abc123"),
                phase.equals("Running")
                    ? ContainerMeta.State.RUNNING
                    : ContainerMeta.State.TERMINATED)));
  }

  /**
   * A procfs fixture next to the cache root where every slot's process lives (host pid = the
   * recorded one, in its pod, mapping its region), so a running exporter's one judgment calls the
   * slots ALIVE; returns it (for {@code --path.procfs}).
   */
  public Path writeProcfs() {
    Path proc = root.resolveSibling(root.getFileName() + "-proc");
    ProcTree procs = ProcTree.at(proc);
    // host pid, container pid, pod, the region its process maps
    Object[][] processes = {
      {1010, 10, UID_TRAIN, "_trainer/a.cache"},
      {1011, 11, UID_TRAIN, "_trainer/a.cache"},
      {1020, 20, UID_SERVE, "_server/b.cache"},
      {1030, 30, UID_DONE, "_job/c.cache"},
      {1040, 40, UID_GONE, "_main/d.cache"},
    };
    for (Object[] p : processes) {
      String uid = (String) p[2];
      ProcEntry.in(procs, (int) p[0], (int) p[1])
          .pod(uid)
          .mapsRegion(root.resolve(uid + p[3]))
          .write();
    }
    return proc;
  }

  /** A provider over the same files with another metadata source. */
  public NodeStateProvider statesWith(PodMetadataSource source) {
    return new NodeStateProvider(
        "node-a", discovery::current, source, InstantSource.fixed(NOW), Duration.ofMinutes(5));
  }

  /** A registry with this module's collectors under {@code config}. */
  public PrometheusRegistry registry(ExporterConfig config, NodeStateProvider provider) {
    PrometheusRegistry r = new PrometheusRegistry();
    Collectors.register(
        CollectorContext.regionsOnly(
            config, provider, errors, new CollectorStats(), new BuildInfo("1.2.3", "abc")),
        r,
        OWN_COLLECTORS::contains);
    return r;
  }

  public PrometheusRegistry registry() {
    return registry(ExporterConfig.defaults(), states);
  }

  public static String text(PrometheusRegistry r) throws IOException {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    PrometheusTextFormatWriter.create().write(out, r.scrape());
    return out.toString(StandardCharsets.UTF_8);
  }

  @Override
  public void close() {
    discovery.close();
  }
}
