package io.vgpu.exporter.reliability;

import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.testing.Samples;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 31 items 1, 9 and 10 on {@code /metrics} of the assembled exporter: what the evidence pass
 * did not see is a metric (not a log line only), its loop is in readiness, and a GPU process of a
 * limited pod without a slot is counted with its reason.
 */
class EvidenceMetricsTest {
  @TempDir Path dir;

  @Test
  void unslottedGpuProcessOfTheNeighbour_isCounted_andThePassesHealthIsExported() throws Exception {
    Path root = Files.createDirectories(dir.resolve("containers"));
    LiveExporter.writeHealthy(root);
    Path proc = Files.createDirectories(dir.resolve("proc"));
    // A process of the neighbour's pod that uses the GPU (maps libcuda) without libvgpu or a slot:
    // started by sshd, say, where nothing preloads the library.
    LiveExporter.writePodProcess(proc, 1103, 103, LiveExporter.HEALTHY_UID);
    Files.writeString(
        proc.resolve("1103/maps"),
        "7f2000000000-7f2002000000 r-xp 00000000 08:01 777"
            + "                 /usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04\n");
    try (LiveExporter ex = LiveExporter.start(root, Map.of("path.procfs", proc.toString()))) {
      ex.awaitPass();
      Samples s = ex.scrape();
      assertThat(
              s.value(
                  "vgpu_container_unslotted_processes",
                  "pod_uid",
                  LiveExporter.HEALTHY_UID,
                  "container",
                  LiveExporter.HEALTHY_CTR,
                  "reason",
                  "library_not_loaded"))
          .isEqualTo(1.0);
      for (String reason :
          new String[] {"pass_budget", "pod_budget", "maps_too_large", "unreadable", "deadline"}) {
        assertThat(s.value("vgpu_exporter_evidence_unseen_processes", "reason", reason))
            .as(reason)
            .isZero();
      }
      assertThat(s.value("vgpu_exporter_evidence_pods_not_fully_seen")).isZero();
      assertThat(s.value("vgpu_exporter_evidence_pass_stalled")).isZero();
      assertThat(s.find("vgpu_exporter_tenant_reads_given_up_total")).hasSize(1);
      assertThat(s.find("vgpu_exporter_evidence_pass_age_seconds")).hasSize(1);
      LiveExporter.assertHealthyNeighbour(s);
      assertThat(ex.get("/readyz").statusCode()).isEqualTo(200);
    }
  }
}
