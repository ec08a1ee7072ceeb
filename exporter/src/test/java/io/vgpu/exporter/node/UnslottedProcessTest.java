package io.vgpu.exporter.node;

import static io.vgpu.exporter.testing.OperatorFixture.usage;
import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.doctor.Finding;
import io.vgpu.exporter.doctor.Severity;
import io.vgpu.exporter.testing.OperatorFixture;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 31 item 10 (exporter): a GPU process of a pod whose regions set limits, with no slot in any
 * of them, runs without limits (started by sshd, {@code su -} or a daemon that clears the
 * environment, so the library never registered it; or without libvgpu). Before, nothing on the node
 * noticed; now the evidence pass names it with a reason, the doctor check 17 fails, and {@code
 * vgpu_container_unslotted_processes} and {@code VgpuProcessUnlimited} report it.
 */
class UnslottedProcessTest {
  private static final long GIB = 1L << 30;

  @TempDir Path tmp;

  @Test
  void gpuProcessesOfALimitedPodWithoutASlot_areReportedWithTheirReason() {
    OperatorFixture fx = new OperatorFixture(tmp);
    Path region =
        fx.region(
            OperatorFixture.UID_A,
            "main",
            OperatorFixture.v12(4 * GIB, 50).slot(7, 1007, 1, usage(GIB, 30)).build());
    fx.process(1007, 7).gpu(region).write(); // registered: holds slot 7
    // libvgpu loaded from ld.so.preload, but started without the limit variables: no slot
    fx.process(1009, 9).mapsLibcuda().mapsLibvgpu("/usr/local/vgpu/libvgpu.so", 9001).write();
    // no libvgpu at all
    fx.process(1010, 10).mapsLibcuda().write();
    // a CPU-only process of the same pod is not a GPU process
    fx.process(1011, 11).write();
    // a GPU process of a pod without regions (no limits) is not this check's
    fx.process(2001, 1).pod(OperatorFixture.UID_B).mapsLibcuda().write();

    NodeEvidence e = fx.evidence();

    assertThat(e.unslottedProcesses())
        .extracting(
            u -> u.process().hostPid() + " " + u.podUid() + " " + u.container() + " " + u.reason())
        .containsExactly(
            "1009 " + OperatorFixture.UID_A + " " + Optional.of("main") + " not_registered",
            "1010 " + OperatorFixture.UID_A + " " + Optional.of("main") + " library_not_loaded");
    List<Finding> f = fx.findings(17);
    assertThat(fx.verdict(17)).isEqualTo(Severity.FAIL);
    assertThat(f).hasSize(1);
    assertThat(String.join("\n", f.getFirst().evidence()))
        .contains("host pid 1009 (container pid 9, container main)")
        .contains("host pid 1010 (container pid 10, container main)")
        .doesNotContain("2001");
  }

  @Test
  void everyGpuProcessSlotted_checkIsOk() {
    OperatorFixture fx = new OperatorFixture(tmp);
    Path region =
        fx.region(
            OperatorFixture.UID_A,
            "main",
            OperatorFixture.v12(4 * GIB, 50).slot(7, 1007, 1, usage(GIB, 30)).build());
    fx.process(1007, 7).gpu(region).write();

    assertThat(fx.evidence().unslottedProcesses()).isEmpty();
    assertThat(fx.verdict(17)).isEqualTo(Severity.OK);
  }
}
