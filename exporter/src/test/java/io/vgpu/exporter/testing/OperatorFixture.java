package io.vgpu.exporter.testing;

import io.vgpu.exporter.doctor.Doctor;
import io.vgpu.exporter.doctor.DoctorReport;
import io.vgpu.exporter.doctor.Finding;
import io.vgpu.exporter.doctor.Severity;
import io.vgpu.exporter.k8s.NodeMeta;
import io.vgpu.exporter.node.EvidenceCollector;
import io.vgpu.exporter.node.NodeEvidence;
import io.vgpu.exporter.nvml.GpuIdentity;
import io.vgpu.exporter.nvml.GpuSnapshot;
import io.vgpu.exporter.nvml.MemoryInfo;
import io.vgpu.exporter.nvml.NvmlSnapshot;
import io.vgpu.exporter.nvml.NvmlStatus;
import io.vgpu.exporter.nvml.RunningProcess;
import io.vgpu.hostpid.ProcFs;
import io.vgpu.hostpid.testing.ProcEntry;
import io.vgpu.hostpid.testing.ProcTree;
import io.vgpu.regioncodec.DeviceUsage;
import io.vgpu.regioncodec.RegionSpec;
import io.vgpu.regioncodec.RegionWriter;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.time.InstantSource;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalLong;

/**
 * A node on disk for the operator tools' tests: a cache root with region files written by the
 * codec's writer, and a fake procfs ({@code
 * <pid>/{stat,status,cgroup,maps,environ,root/etc/ld.so.preload}}) formatted the way Linux formats
 * them. Evidence is gathered by the real {@link EvidenceCollector}.
 */
public final class OperatorFixture {
  public static final String UID_A = "0f1e2d3c-4b5a-4978-8796-a5b4c3d2e1f0";
  public static final String UID_B = "11111111-2222-4333-8444-555555555555";
  public static final String GPU0 = "GPU-6a1b2c3d-0000-1111-2222-333344445555";
  public static final String CID_A = "a".repeat(64);
  public static final Instant NOW = Instant.parse("2026-11-26T02:00:00Z");

  public final Path root;
  public final Path cacheRoot;
  public final Path proc;
  public NvmlSnapshot nvml = NvmlSnapshot.unavailable(NOW, "not in this test");
  public Optional<NodeMeta> node = Optional.empty();
  public Duration window = Duration.ZERO;

  /** Rewrites regions between the two samples (for window checks). */
  public Runnable betweenSamples = () -> {};

  public OperatorFixture(Path tmp) {
    this.root = tmp;
    this.cacheRoot = tmp.resolve("containers");
    this.proc = tmp.resolve("proc");
    try {
      Files.createDirectories(cacheRoot);
      Files.createDirectories(proc);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Writes {@code <root>/<uid>_<ctr>/vgpu.cache} and returns it. */
  public Path region(String uid, String container, RegionSpec spec) {
    Path dir = cacheRoot.resolve(uid + "_" + container);
    try {
      Files.createDirectories(dir);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    Path file = dir.resolve("vgpu.cache");
    RegionWriter.create(file, spec);
    return file;
  }

  /** An empty container directory (no cache file yet). */
  public Path emptyContainer(String uid, String container) {
    Path dir = cacheRoot.resolve(uid + "_" + container);
    try {
      Files.createDirectories(dir);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return dir;
  }

  public static long inode(Path file) {
    return ProcEntry.inode(file);
  }

  /** A v1.2 region builder with one 16 GiB GPU, SM limit {@code sm}. */
  public static RegionSpec.Builder v12(long limitBytes, int sm) {
    return RegionSpec.builder(io.vgpu.regioncodec.Layout.V1_2).device(GPU0, limitBytes, sm);
  }

  public static DeviceUsage usage(long bytes, long smUtil) {
    return new DeviceUsage(0, bytes / 4, 0, bytes - bytes / 4, bytes, bytes, smUtil);
  }

  /**
   * One process of the fake procfs, to build and write: in pod {@link #UID_A}'s container {@link
   * #CID_A} (burstable), with {@code maps}, {@code environ} and a container root whose {@code
   * /etc/ld.so.preload} names libvgpu.
   */
  public ProcEntry process(int hostPid, int containerPid) {
    return ProcEntry.in(ProcTree.at(proc), hostPid, containerPid)
        .pod(UID_A)
        .container(CID_A)
        .qos("burstable")
        .withMaps()
        .withEnviron()
        .preload("/usr/local/vgpu/libvgpu.so\n");
  }

  /** NVML up with GPU0 running {@code pids} using {@code bytes} each at {@code smRatio} each. */
  public void nvmlUp(Map<Integer, Long> memoryByPid, Map<Integer, Double> smByPid) {
    List<RunningProcess> procs = new ArrayList<>();
    memoryByPid.forEach((pid, bytes) -> procs.add(new RunningProcess(pid, OptionalLong.of(bytes))));
    GpuSnapshot gpu =
        new GpuSnapshot(
            new GpuIdentity(0, -1, GPU0, "NVIDIA H100"),
            Optional.of(new MemoryInfo(80L << 30, 10L << 30)),
            OptionalDouble.of(0.5),
            OptionalDouble.of(0.1),
            Optional.of(procs),
            Optional.of(Map.copyOf(smByPid)));
    nvml = new NvmlSnapshot(NOW, NvmlStatus.up(Optional.of("580.159.04")), List.of(gpu));
  }

  public NodeEvidence evidence() {
    return collector(EvidenceCollector.DEFAULT_MAPS_BYTES_PER_PASS).collect(List.of(cacheRoot));
  }

  public EvidenceCollector collector(long mapsBytesPerPass) {
    return new EvidenceCollector(
        new ProcFs(proc),
        () -> nvml,
        () -> node,
        InstantSource.fixed(NOW),
        window,
        d -> betweenSamples.run(),
        NodeEvidence.Thresholds.defaults(),
        mapsBytesPerPass);
  }

  /** A collector with its own pass and per-pod {@code maps} budgets. */
  public EvidenceCollector collector(long mapsBytesPerPass, long mapsBytesPerPod) {
    return new EvidenceCollector(
        new ProcFs(proc),
        () -> nvml,
        () -> node,
        InstantSource.fixed(NOW),
        window,
        d -> betweenSamples.run(),
        NodeEvidence.Thresholds.defaults(),
        mapsBytesPerPass,
        mapsBytesPerPod);
  }

  public Path cacheRoot() {
    return cacheRoot;
  }

  public DoctorReport doctor() {
    return Doctor.standard().run(evidence());
  }

  /** The findings of one check. */
  public List<Finding> findings(int check) {
    return doctor().findings().stream().filter(f -> f.check() == check).toList();
  }

  /** The worst severity one check reports. */
  public Severity verdict(int check) {
    List<Finding> f = findings(check);
    Severity worst =
        f.stream().allMatch(x -> x.severity() == Severity.SKIP) ? Severity.SKIP : Severity.OK;
    for (Finding x : f) {
      if (x.severity().exitCode() > worst.exitCode()) {
        worst = x.severity();
      }
    }
    return worst;
  }
}
