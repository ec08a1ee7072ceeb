package io.vgpu.regioncodec;

import java.nio.file.Path;

/**
 * Opens a region file and prints {@code OK} or the {@link RegionException.Reason}. Run by {@link
 * PermissionTest} in a child JVM under another uid, because root ignores file permissions.
 */
public final class OpenAsOtherUser {
  private OpenAsOtherUser() {}

  public static void main(String[] args) {
    try (RegionFile file = RegionFile.openReadOnly(Path.of(args[0]))) {
      file.snapshot();
      System.out.println("OK");
    } catch (RegionException e) {
      System.out.println(e.reason());
    }
  }
}
