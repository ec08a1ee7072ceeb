package io.vgpu.exporter.reliability;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Disk full under the region files the exporter maps (issue 7): each scenario of {@link
 * DiskFullNode} runs in a child JVM inside a private mount namespace ({@code unshare -m}, mounts
 * private), on a filesystem of a few MiB mounted there: tmpfs for the read faults and the
 * write-back component, ext4 on a loop device for the live feedback write (on ext4 a hole reads as
 * zeros and only a store needs a block). Needs root; the ext4 case also a free loop device.
 */
class DiskFullTest {
  @TempDir Path dir;

  private record Child(int exit, String output) {}

  /** Runs {@code DiskFullNode scenario <dir/mnt>} after {@code mount} in a new mount namespace. */
  private Child runIsolated(String scenario, String mount) throws Exception {
    assumeTrue(
        "root".equals(System.getProperty("user.name")), "needs root for unshare -m and mount");
    Path mnt = Files.createDirectories(dir.resolve("mnt"));
    Path log = dir.resolve(scenario + ".log");
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    ProcessBuilder pb =
        new ProcessBuilder(
            "unshare",
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            mount
                + " || exit 77; exec \"$JAVA\" -XX:+UseSerialGC -Xmx256m"
                + " --enable-native-access=ALL-UNNAMED -cp \"$CP\" "
                + DiskFullNode.class.getName()
                + " \"$SCENARIO\" \"$MNT\"");
    pb.environment().put("JAVA", java);
    pb.environment().put("CP", System.getProperty("java.class.path"));
    pb.environment().put("SCENARIO", scenario);
    pb.environment().put("MNT", mnt.toString());
    pb.environment().put("IMG", dir.resolve("fs.img").toString());
    pb.redirectErrorStream(true).redirectOutput(log.toFile());
    Process p = pb.start();
    if (!p.waitFor(180, TimeUnit.SECONDS)) {
      p.destroyForcibly();
      throw new AssertionError("child timed out:\n" + Files.readString(log));
    }
    String out = Files.readString(log, StandardCharsets.UTF_8);
    out.lines().filter(l -> l.startsWith("disk-full:")).forEach(System.out::println);
    // The mount lived only in the child's namespace.
    try (var s = Files.list(mnt)) {
      assertThat(s.toList()).as("nothing leaked to the host's view of the mount point").isEmpty();
    }
    return new Child(p.exitValue(), out);
  }

  private static void assertSurvivedAndPassed(Child c, String scenario) {
    assertThat(c.output())
        .as("no JVM crash")
        .doesNotContain("A fatal error has been detected by the Java Runtime Environment");
    assertThat(c.exit()).as("child exit; output:\n%s", c.output()).isZero();
    assertThat(c.output()).contains("disk-full: PASS " + scenario);
  }

  @Test
  void tmpfsFull_sparseTenantRegion_readsAndWriteBackFaultsCaughtCountedAndRecovered()
      throws Exception {
    Child c = runIsolated("read", "mount -t tmpfs -o size=4m vgpu-diskfull \"$MNT\"");
    assumeTrue(c.exit() != 77, "cannot mount tmpfs in a private namespace:\n" + c.output());
    assertSurvivedAndPassed(c, "read");
    // One log line per change of error state, not per read: 1 000 direct reads + 20 scrapes.
    assertThat(count(c.output(), "msg=\"region read faulted\""))
        .as("log:\n%s", c.output())
        .isEqualTo(1);
    assertThat(count(c.output(), "msg=\"region readable again\""))
        .as("log:\n%s", c.output())
        .isEqualTo(1);
    assertThat(count(c.output(), "msg=\"region write failed\""))
        .as("log:\n%s", c.output())
        .isEqualTo(1);
    assertThat(count(c.output(), "msg=\"region writes succeed again\""))
        .as("log:\n%s", c.output())
        .isEqualTo(1);
  }

  @Test
  void ext4Full_regionOfNoProcessNeverWritten_storeIntoHoleCountedAndRetriedAfterSpaceFreed()
      throws Exception {
    Child c =
        runIsolated(
            "write",
            "truncate -s 16M \"$IMG\" && mkfs.ext4 -q -F -b 4096 -m 0 -O ^has_journal \"$IMG\""
                + " && mount -o loop \"$IMG\" \"$MNT\"");
    assumeTrue(c.exit() != 77, "no ext4 on a loop device here:\n" + c.output());
    assertSurvivedAndPassed(c, "write");
    assertThat(c.output()).contains("reason=\"fault\"");
  }

  private static long count(String text, String needle) {
    return text.lines().filter(l -> l.contains(needle)).count();
  }
}
