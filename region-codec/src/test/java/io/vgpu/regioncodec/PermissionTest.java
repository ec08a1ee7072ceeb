package io.vgpu.regioncodec;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A file the process may not read yields {@code PERMISSION_DENIED}. Root reads everything, so as
 * root the check runs in a child JVM dropped to uid/gid 65534 with {@code setpriv}.
 */
class PermissionTest {
  @TempDir Path dir;

  @Test
  void openReadOnly_unreadableFile_throwsPermissionDenied() throws Exception {
    Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxr-xr-x"));
    Path path = dir.resolve("secret.cache");
    RegionWriter.create(path, Fixtures.typical(Layout.V1_2));
    Files.setPosixFilePermissions(path, PosixFilePermissions.fromString("---------"));
    boolean root = "root".equals(System.getProperty("user.name"));
    if (!root) {
      RegionFileTest.assertReason(
          () -> RegionFile.openReadOnly(path), RegionException.Reason.PERMISSION_DENIED);
      return;
    }
    assumeTrue(
        Files.isExecutable(Path.of("/usr/bin/setpriv")),
        "running as root without /usr/bin/setpriv: cannot drop privileges to test permissions");
    Path java = Path.of(System.getProperty("java.home"), "bin", "java");
    List<String> command =
        new ArrayList<>(
            List.of(
                "/usr/bin/setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                java.toString(),
                "-Xshare:auto",
                "-XX:TieredStopAtLevel=1",
                "--enable-native-access=ALL-UNNAMED",
                "-cp",
                System.getProperty("java.class.path"),
                OpenAsOtherUser.class.getName(),
                path.toString()));
    Process child = new ProcessBuilder(command).redirectErrorStream(true).start();
    String output =
        new String(child.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
    assertThat(child.waitFor(60, TimeUnit.SECONDS)).isTrue();
    assertThat(output).endsWith("PERMISSION_DENIED");
  }
}
