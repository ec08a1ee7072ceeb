package io.vgpu.exporter.reliability;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The path another architecture (aarch64, powerpc) and an older kernel take, run on this machine: a
 * child JVM told that its architecture's {@code O_*} table comes first (the kernel refuses it here,
 * as it would refuse x86's there, and the confirmed table is used) and that {@code openat2} is
 * missing (the component walk resolves names). Its discovery must keep passing while a tenant flips
 * its cache file with a FIFO: before the safe open, a non-amd64 JVM checked the type and then
 * opened by name, and one lost race blocked discovery for good.
 */
class SecondArchitectureTest {
  @TempDir Path dir;

  @Test
  void walkResolverWithAnotherArchitecturesFlagTable_fifoFlipsNeverBlockDiscovery()
      throws Exception {
    Path log = dir.resolve("child.log");
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    ProcessBuilder pb =
        new ProcessBuilder(
            java,
            "-XX:+UseSerialGC",
            "-Xmx256m",
            "--enable-native-access=ALL-UNNAMED",
            "-Dvgpu.safe-open.resolver=walk",
            "-Dvgpu.safe-open.arch=aarch64",
            "-cp",
            System.getProperty("java.class.path"),
            WalkResolverNode.class.getName(),
            dir.resolve("containers").toString());
    pb.redirectErrorStream(true).redirectOutput(log.toFile());
    Process p = pb.start();
    boolean done = p.waitFor(60, TimeUnit.SECONDS);
    if (!done) {
      p.destroyForcibly();
    }
    String out = Files.readString(log, StandardCharsets.UTF_8);
    out.lines().filter(l -> l.startsWith("walk-node:")).forEach(System.out::println);
    assertThat(done).as("child finished; output:\n%s", out).isTrue();
    assertThat(p.exitValue()).as("child exit; output:\n%s", out).isZero();
    assertThat(out).contains("walk-node: PASS").contains("walk/generic (refused: arm-ppc)");
  }
}
