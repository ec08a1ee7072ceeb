package io.vgpu.exporter.attribution;

import static io.vgpu.exporter.attribution.World.GIB;
import static io.vgpu.exporter.attribution.World.GPU0;
import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.discovery.ContainerKey;
import io.vgpu.exporter.nvml.NvmlSnapshot;
import io.vgpu.regioncodec.DeviceHeader;
import io.vgpu.regioncodec.DeviceUsage;
import io.vgpu.regioncodec.Layout;
import io.vgpu.regioncodec.ProcessSlot;
import io.vgpu.regioncodec.RegionSnapshot;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.stream.Stream;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AfterContainer;

/**
 * Hostile regions: a tenant controls every byte of its own region. Whatever pids, hostpids and
 * utilization claims its slots hold, reconciliation never fails, never attributes a process of
 * another pod (or of the host) to the tenant, and keeps every value in range.
 */
class ReconcilerProperties {
  private static final ContainerKey VICTIM = World.key(1, "victim");
  private static final ContainerKey TENANT = World.key(2, "tenant");
  private static final Set<Integer> TENANT_PROCESSES = Set.of(9101, 9102);
  private static Path dir;
  private static World world;
  private static NvmlSnapshot nvml;

  private static synchronized World world() throws IOException {
    if (world == null) {
      dir = Files.createTempDirectory("reconciler-properties");
      world = new World(dir);
      world
          .podProcess(9001, 1, 1, 1, 1)
          .podProcess(9002, 2, 1, 1, 2)
          .podProcess(9003, 3, 1, 7, 1) // the victim pod's pause: pid 1 too
          .podProcess(9101, 4, 2, 2, 1)
          .podProcess(9102, 5, 2, 2, 5)
          .hostProcess(900, 6);
      nvml =
          world
              .gpu(0, GPU0, 100)
              .gpuProcess(0, 9001, GIB)
              .gpuProcess(0, 9002, GIB)
              .gpuProcess(0, 9101, GIB)
              .gpuProcess(0, 900, GIB)
              .busy(0, 9001, 50)
              .busy(0, 9002, 30)
              .busy(0, 9101, 10)
              .busy(0, 900, 10)
              .poll();
    }
    return world;
  }

  @AfterContainer
  static void cleanUp() throws IOException {
    if (world != null) {
      world.close();
      try (Stream<Path> files = Files.walk(dir)) {
        for (Path p : files.sorted(Comparator.reverseOrder()).toList()) {
          Files.delete(p);
        }
      }
      world = null;
    }
  }

  record Claim(int pid, int hostPid, int status, long bytes, long smUtil) {}

  @Provide
  Arbitrary<List<Claim>> claims() {
    Arbitrary<Integer> pids =
        Arbitraries.oneOf(
            Arbitraries.of(1, 2, 5, 7, 9001, 9101), Arbitraries.integers().between(1, 1 << 22));
    Arbitrary<Integer> hostPids =
        Arbitraries.oneOf(
            Arbitraries.of(0, 1, 2, 5, 900, 9001, 9002, 9003, 9101, 9102, -1, Integer.MAX_VALUE),
            Arbitraries.integers());
    return Combinators.combine(
            pids,
            hostPids,
            Arbitraries.of(1, 2, 3, -1),
            Arbitraries.longs().between(0, Long.MAX_VALUE),
            Arbitraries.longs().between(0, Long.MAX_VALUE))
        .as(Claim::new)
        .list()
        .ofMaxSize(12);
  }

  private static RegionSnapshot region(List<Claim> claims) {
    Map<Integer, Claim> unique = new LinkedHashMap<>();
    claims.forEach(c -> unique.putIfAbsent(c.pid(), c));
    List<ProcessSlot> slots = new ArrayList<>();
    int i = 0;
    for (Claim c : unique.values()) {
      DeviceUsage u = new DeviceUsage(0, 0, 0, c.bytes(), c.bytes(), 0, c.smUtil());
      slots.add(
          new ProcessSlot(i++, c.pid(), c.hostPid(), c.status(), List.of(u), Optional.empty()));
    }
    return new RegionSnapshot(
        Layout.V1_2,
        1,
        2,
        0,
        1,
        List.of(new DeviceHeader(0, GPU0, 0, 0)),
        slots.size(),
        1,
        2,
        1,
        0,
        slots,
        false,
        0,
        Optional.empty());
  }

  @Property(tries = 200)
  void reconcile_anyTenantRegion_attributesOnlyTheTenantsOwnProcesses(
      @ForAll("claims") List<Claim> claims) throws IOException {
    World w = world();
    // no container id: the API server is down, only the pod boundary protects the victim
    ContainerInput tenant =
        new ContainerInput(
            TENANT,
            Optional.empty(),
            List.of(new ContainerInput.Region(dir.resolve("tenant.cache"), region(claims))));
    ContainerInput victim =
        new ContainerInput(
            VICTIM,
            Optional.of(World.containerId(1)),
            List.of(
                new ContainerInput.Region(
                    dir.resolve("victim.cache"),
                    region(List.of(new Claim(1, 9001, 1, GIB, 50), new Claim(2, 1, 1, GIB, 0))))));
    Reconciler r = new Reconciler(Reconciler.Settings.defaults());

    AttributionResult res =
        r.reconcile(List.of(tenant, victim), nvml, w.resolver, History.EMPTY, w.clock.instant());

    ContainerAttribution t = res.container(TENANT).orElseThrow();
    assertThat(t.hostPids()).allSatisfy(p -> assertThat(TENANT_PROCESSES).contains(p));
    for (DeviceAttribution d : t.devices()) {
      d.smUtilization().ifPresent(v -> assertThat(v).isBetween(0.0, 0.10 + 1e-9));
      assertThat(d.usedBytes()).isNotNegative();
      assertThat(d.zombieBytes()).isNotNegative();
    }
    // the victim keeps exactly its own work, whatever the tenant claimed
    ContainerAttribution v = res.container(VICTIM).orElseThrow();
    assertThat(v.hostPids()).containsExactlyInAnyOrder(9001, 9002);
    assertThat(v.devices().getFirst().smUtilization().getAsDouble())
        .isCloseTo(0.80, org.assertj.core.data.Offset.offset(1e-6));
    assertThat(res.gpu(GPU0).orElseThrow().unattributedProcesses()).isEqualTo(1); // the daemon
  }

  @Property(tries = 50)
  void reconcile_sameInputsTwice_sameAttribution(@ForAll("claims") List<Claim> claims)
      throws IOException {
    World w = world();
    ContainerInput tenant =
        new ContainerInput(
            TENANT,
            Optional.empty(),
            List.of(new ContainerInput.Region(dir.resolve("tenant.cache"), region(claims))));
    Reconciler r =
        new Reconciler(
            new Reconciler.Settings(Duration.ZERO, Duration.ofHours(1), Duration.ofSeconds(60)));
    AttributionResult a =
        r.reconcile(List.of(tenant), nvml, w.resolver, History.EMPTY, w.clock.instant());
    AttributionResult b =
        r.reconcile(List.of(tenant), nvml, w.resolver, History.EMPTY, w.clock.instant());
    assertThat(a.containers()).isEqualTo(b.containers());
  }
}
