package io.vgpu.exporter.cli;

import io.vgpu.exporter.config.ExporterConfig;
import io.vgpu.exporter.config.Flag;
import io.vgpu.exporter.config.Flags;
import io.vgpu.exporter.node.EvidenceCollector;
import io.vgpu.exporter.node.NodeEvidence;
import io.vgpu.exporter.nvml.JnaNvmlClient;
import io.vgpu.exporter.nvml.NvmlSampler;
import io.vgpu.exporter.nvml.NvmlSnapshot;
import io.vgpu.exporter.text.TenantText;
import io.vgpu.hostpid.ProcFs;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * What the node-side commands share (a picocli mixin): {@code --json} and {@code --uid}, and the
 * configuration resolved from the same {@link Flags} as {@code serve} ({@code --path.cache-root},
 * {@code --path.procfs}, the NVML flags; {@code --cache-root} and {@code --proc-root} stay as
 * aliases), command line first, then {@code VGPU_EXPORTER_*}, then the default.
 */
public final class NodeOptions {
  /** The exporter flags every node command takes: where the node's files are. */
  static final List<Flag<?>> PATHS = List.of(Flags.CACHE_ROOT, Flags.PROCFS);

  /** {@link #PATHS} plus NVML and the node name (doctor). */
  static final List<Flag<?>> PATHS_NVML_NODE =
      List.of(Flags.CACHE_ROOT, Flags.PROCFS, Flags.NVML, Flags.NVML_LIBRARY, Flags.NODE_NAME);

  @Spec(Spec.Target.MIXEE)
  CommandSpec command;

  @Option(names = "--json", description = "Machine-readable output.")
  boolean json;

  @Option(names = "--uid", description = "Only this pod (UID).")
  String uid;

  private ExporterConfig config;

  /**
   * The command's configuration (the exporter flags it was given, the environment, defaults).
   *
   * @throws io.vgpu.exporter.config.ConfigException naming every bad value
   */
  ExporterConfig config() {
    if (config == null) {
      config =
          ExporterConfig.resolve(
              FlagOptions.values(command.commandLine().getParseResult()), System.getenv());
    }
    return config;
  }

  /**
   * Checks that every target exists; prints why not to {@code err}. A missing cache root is an
   * error, not an empty node: "nothing to do" there would hide a wrong path.
   */
  static boolean targetsExist(List<Path> targets, boolean defaultRoot, java.io.PrintWriter err) {
    for (Path t : targets) {
      if (!java.nio.file.Files.exists(t, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
        err.println(
            "error: "
                + TenantText.clean(t)
                + " does not exist"
                + (defaultRoot
                    ? " (the cache root: set --path.cache-root=DIR or"
                        + " VGPU_EXPORTER_PATH_CACHE_ROOT to the directory that holds the"
                        + " <podUID>_<container> directories)"
                    : ""));
        err.flush();
        return false;
      }
    }
    return true;
  }

  Path cacheRoot() {
    return config().cacheRoot();
  }

  ProcFs procFs() {
    return new ProcFs(config().procfs());
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

  /**
   * NVML polled twice {@code window} apart (per-process utilization needs a window), its
   * per-process samples collected every {@link NvmlSampler#SAMPLE_COLLECTION_INTERVAL} between, as
   * the serving exporter collects them: NVML answers a per-process query with the recent periods
   * only, so two reads alone would see a fraction of the window and read the utilization low.
   */
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
        long end = System.nanoTime() + window.toNanos();
        for (long left = window.toNanos(); left > 0; left = end - System.nanoTime()) {
          Thread.sleep(
              Duration.ofNanos(Math.min(left, NvmlSampler.SAMPLE_COLLECTION_INTERVAL.toNanos())));
          sampler.collectProcessSamples();
        }
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
