package io.vgpu.exporter.cli;

import io.vgpu.exporter.node.EvidenceCollector;
import io.vgpu.exporter.node.NodeEvidence;
import io.vgpu.exporter.nvml.JnaNvmlClient;
import io.vgpu.exporter.nvml.NvmlSampler;
import io.vgpu.exporter.nvml.NvmlSnapshot;
import io.vgpu.hostpid.ProcFs;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.Optional;
import picocli.CommandLine.Option;

/** Options the node-side commands share (a picocli mixin). */
public final class NodeOptions {
  @Option(
      names = "--cache-root",
      description = "Cache root with <podUID>_<container>/ directories (default ${DEFAULT-VALUE}).",
      defaultValue = "${env:VGPU_EXPORTER_PATH_CACHE_ROOT:-/usr/local/vgpu/containers}")
  Path cacheRoot;

  @Option(
      names = "--proc-root",
      description = "The host's procfs (default ${DEFAULT-VALUE}).",
      defaultValue = "${env:VGPU_EXPORTER_PATH_PROCFS:-/proc}")
  Path procRoot;

  @Option(names = "--json", description = "Machine-readable output.")
  boolean json;

  @Option(names = "--uid", description = "Only this pod (UID).")
  String uid;

  ProcFs procFs() {
    return new ProcFs(procRoot);
  }

  /** Evidence from the filesystem and procfs only (no NVML, no API server), one sample. */
  EvidenceCollector filesOnly() {
    return new EvidenceCollector(
        procFs(),
        () -> NvmlSnapshot.unavailable(Clock.systemUTC().instant(), NodeEvidence.NVML_NOT_QUERIED),
        Optional::empty,
        Clock.systemUTC(),
        Duration.ZERO,
        d -> {},
        NodeEvidence.Thresholds.defaults());
  }

  /** NVML sampled twice {@code window} apart (per-process utilization needs a window). */
  static NvmlSnapshot sampleNvml(String library, Duration window) {
    try (NvmlSampler sampler =
        new NvmlSampler(
            () -> JnaNvmlClient.load(library),
            new NvmlSampler.Settings(
                window.isZero() ? Duration.ofSeconds(1) : window,
                window.isZero() ? Duration.ofSeconds(1) : window,
                Duration.ofSeconds(1)),
            Clock.systemUTC())) {
      sampler.sampleOnce();
      if (sampler.latest().status().up() && !window.isZero()) {
        Thread.sleep(window.toMillis());
        sampler.sampleOnce();
      }
      return sampler.latest();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return NvmlSnapshot.unavailable(Clock.systemUTC().instant(), "interrupted");
    } catch (RuntimeException | LinkageError e) {
      return NvmlSnapshot.unavailable(
          Clock.systemUTC().instant(), "NVML could not be loaded: " + e);
    }
  }
}
