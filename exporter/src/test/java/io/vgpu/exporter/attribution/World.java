package io.vgpu.exporter.attribution;

import io.vgpu.exporter.discovery.ContainerKey;
import io.vgpu.exporter.nvml.FakeNvml;
import io.vgpu.exporter.nvml.JnaNvmlClient;
import io.vgpu.exporter.nvml.MutableClock;
import io.vgpu.exporter.nvml.NvmlSampler;
import io.vgpu.exporter.nvml.NvmlSnapshot;
import io.vgpu.hostpid.HostPidResolver;
import io.vgpu.hostpid.ProcFs;
import io.vgpu.hostpid.testing.ProcEntry;
import io.vgpu.hostpid.testing.ProcTree;
import io.vgpu.regioncodec.DeviceUsage;
import io.vgpu.regioncodec.ExtensionDevice;
import io.vgpu.regioncodec.Layout;
import io.vgpu.regioncodec.RegionExtension;
import io.vgpu.regioncodec.RegionFile;
import io.vgpu.regioncodec.RegionSpec;
import io.vgpu.regioncodec.RegionWriter;
import io.vgpu.regioncodec.SlotExtension;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * A simulated node for attribution tests: a procfs tree (the hostpid-resolver reads it for real),
 * region files written and read by region-codec, and the fake libnvidia-ml driven through JNA and
 * the real sampler. Nothing is mocked: only the kernel's /proc and the driver are fixtures.
 */
final class World implements AutoCloseable {
  static final String GPU0 = "GPU-00000000-0000-0000-0000-000000000000";
  static final String GPU1 = "GPU-11111111-1111-1111-1111-111111111111";
  static final long GIB = 1L << 30;
  static final Instant START = Instant.parse("2026-11-26T03:00:00Z");

  final Path root;
  final Path proc;
  private final ProcTree procs;
  final MutableClock clock = new MutableClock(START);
  final HostPidResolver resolver;
  final FakeNvml fake;
  final NvmlSampler sampler;
  private final List<String> nvmlLines = new ArrayList<>();

  World(Path root) {
    this.root = root;
    this.proc = root.resolve("proc");
    this.procs = ProcTree.at(proc);
    this.resolver = new HostPidResolver(new ProcFs(proc), Duration.ZERO, System::nanoTime);
    this.fake = FakeNvml.in(root);
    this.sampler =
        new NvmlSampler(
            () -> JnaNvmlClient.load(FakeNvml.library().toString()),
            new NvmlSampler.Settings(
                Duration.ofSeconds(1), Duration.ofSeconds(3), Duration.ofSeconds(1)),
            clock);
  }

  static String podUid(int n) {
    return "%08x-0000-4000-8000-%012x".formatted(n, n);
  }

  static String containerId(int n) {
    return "%064x".formatted(1000 + n);
  }

  static ContainerKey key(int pod, String container) {
    return new ContainerKey(podUid(pod), container);
  }

  // ---- /proc ----

  /** A process of pod {@code pod}, container {@code ctr}, with host pid and in-container pid. */
  World podProcess(int hostPid, long startTicks, int pod, int ctr, int innerPid) {
    ProcEntry.in(procs, hostPid, innerPid)
        .comm("p" + hostPid)
        .start(startTicks)
        .pod(podUid(pod))
        .container(containerId(ctr))
        .write();
    return this;
  }

  /** A host daemon (not in any pod). */
  World hostProcess(int hostPid, long startTicks) {
    ProcEntry.in(procs, hostPid, hostPid)
        .comm("p" + hostPid)
        .start(startTicks)
        .hostService("daemon.service")
        .write();
    return this;
  }

  /**
   * Process {@code pid} maps region {@code file} (a {@code maps} line with the file's inode), as a
   * process of HAMi-core maps its container's cache file: the evidence the one judgment needs to
   * call the slot ALIVE.
   */
  World mapsRegion(int pid, Path file) {
    procs.write(pid, "maps", ProcEntry.regionMapping(file) + "\n");
    return this;
  }

  World kill(int pid) {
    procs.remove(pid);
    return this;
  }

  // ---- regions ----

  /** Writes a v1.2 region for a container and returns its path. */
  Path region(ContainerKey key, RegionSpec spec) {
    Path dir = root.resolve("containers").resolve(key.dirName());
    mkdirs(dir);
    Path file = dir.resolve("r.cache");
    RegionWriter.create(file, spec);
    return file;
  }

  static RegionSpec.Builder spec(String... uuids) {
    RegionSpec.Builder b = RegionSpec.builder(Layout.V1_2).lastKernelTime(START.getEpochSecond());
    for (String u : uuids) {
      b.device(u, 8 * GIB, 0);
    }
    return b;
  }

  static DeviceUsage usage(int device, long bytes, long smUtil) {
    return new DeviceUsage(device, bytes / 4, 0, bytes - bytes / 4, bytes, 0, smUtil);
  }

  static RegionExtension extension(int devices) {
    List<ExtensionDevice> d = new ArrayList<>();
    for (int i = 0; i < devices; i++) {
      d.add(ExtensionDevice.zero(i));
    }
    return new RegionExtension(1, 0, 0, 0, "test", "", "", 0, 0, d);
  }

  static RegionSpec.SlotSpec slotWithStart(int pid, int hostPid, long startTicks, DeviceUsage u) {
    return RegionSpec.SlotSpec.of(pid, hostPid, 1, List.of(u))
        .withExtension(new SlotExtension(startTicks, 0, SlotExtension.HOSTPID_UNKNOWN));
  }

  static ContainerInput input(ContainerKey key, int ctr, Path... regions) {
    List<ContainerInput.Region> rs = new ArrayList<>();
    for (Path p : regions) {
      try (RegionFile f = RegionFile.openReadOnly(p)) {
        rs.add(new ContainerInput.Region(p, f.snapshot()));
      }
    }
    return new ContainerInput(key, ctr < 0 ? Optional.empty() : Optional.of(containerId(ctr)), rs);
  }

  // ---- NVML ----

  World gpu(int index, String uuid, int utilPercent) {
    nvmlLines.add(
        "device "
            + index
            + " uuid="
            + uuid
            + " name=NVIDIA_H100 total="
            + 80 * GIB
            + " used="
            + 10 * GIB
            + " util="
            + utilPercent
            + " memutil=3");
    return this;
  }

  World gpuProcess(int device, int pid, long bytes) {
    nvmlLines.add("process " + device + " pid=" + pid + " used=" + bytes);
    return this;
  }

  /** Samples every 200 ms for the last 4 s at {@code sm} percent. */
  World busy(int device, int pid, int sm) {
    long now = clock.micros();
    for (long t = now - 4_000_000; t <= now; t += 200_000) {
      nvmlLines.add("sample " + device + " pid=" + pid + " sm=" + sm + " mem=1 ts=" + t);
    }
    return this;
  }

  /**
   * Samples every 200 ms from 4 s ago until {@code ahead} from now (for tests on the real clock).
   */
  World busyUntil(int device, int pid, int sm, Duration ahead) {
    long now = clock.micros();
    for (long t = now - 4_000_000; t <= now + ahead.toNanos() / 1000; t += 200_000) {
      nvmlLines.add("sample " + device + " pid=" + pid + " sm=" + sm + " mem=1 ts=" + t);
    }
    return this;
  }

  World nvmlLine(String line) {
    nvmlLines.add(line);
    return this;
  }

  World clearNvml() {
    nvmlLines.clear();
    return this;
  }

  /** Writes the fake's config and polls once; returns the sampler's snapshot. */
  NvmlSnapshot poll() {
    fake.write(nvmlLines.toArray(String[]::new));
    sampler.sampleOnce();
    return sampler.latest();
  }

  void advance(Duration d) {
    clock.advance(d);
  }

  private static void mkdirs(Path p) {
    try {
      Files.createDirectories(p);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  @Override
  public void close() {
    sampler.close();
  }
}
