package io.vgpu.exporter.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;

/**
 * A procfs fixture ({@code --path.procfs}) with pod processes as Linux formats them: {@code stat},
 * {@code status} (NSpid), {@code cgroup} (the pod's) and {@code maps} mapping the container's
 * region file, as a process that loaded HAMi-core maps it. The one judgment calls a slot ALIVE only
 * with this evidence, so tests of values read from live slots give their processes here.
 */
public final class TestProcfs {
  private TestProcfs() {}

  /** Writes process {@code hostPid} ({@code containerPid} inside) of pod {@code podUid}. */
  public static void podProcess(
      Path proc, int hostPid, int containerPid, String podUid, Path region) {
    try {
      Path dir = Files.createDirectories(proc.resolve(Integer.toString(hostPid)));
      Files.writeString(
          dir.resolve("stat"),
          hostPid
              + " (python3) S 1 "
              + hostPid
              + " "
              + hostPid
              + " 0 -1 4194560 2350 0 0 0 12 9 0 0 20 0 1 0 4242 12345678 900"
              + " 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n");
      String chain = hostPid + "\t" + containerPid;
      Files.writeString(
          dir.resolve("status"),
          "Name:\tpython3\nState:\tS (sleeping)\nTgid:\t"
              + hostPid
              + "\nPid:\t"
              + hostPid
              + "\nPPid:\t1\nNStgid:\t"
              + chain
              + "\nNSpid:\t"
              + chain
              + "\nThreads:\t1\n");
      Files.writeString(
          dir.resolve("cgroup"),
          "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod"
              + podUid.replace('-', '_')
              + ".slice/cri-containerd-"
              + "%064x".formatted(hostPid)
              + ".scope\n");
      long inode =
          ((Number) Files.getAttribute(region, "unix:ino", LinkOption.NOFOLLOW_LINKS)).longValue();
      Files.writeString(
          dir.resolve("maps"),
          "7f0000000000-7f00001ea000 rw-s 00000000 00:2a " + inode + " " + region + "\n");
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
