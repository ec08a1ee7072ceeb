package io.vgpu.exporter.demo;

import io.vgpu.hostpid.ProcFs;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Writes procfs entries ({@code <dir>/<host pid>/{stat,status,cgroup,maps,environ}}) formatted as
 * Linux formats them, for processes the demo wants the exporter to see: the exporter served with
 * {@code --path.procfs=<dir>} judges exactly these processes and none of the machine's own.
 */
final class FakeProcfs {
  private FakeProcfs() {}

  /**
   * One process as procfs shows it.
   *
   * @param hostPid its pid on the host (the directory name)
   * @param nsPid its pid in its innermost PID namespace (the host pid when it has none of its own)
   * @param name its command name ({@code stat} field 2, {@code status} Name)
   * @param cgroup the one line of {@code /proc/<pid>/cgroup}, without the newline
   * @param maps the lines of {@code /proc/<pid>/maps}, each ending in a newline
   * @param environ its environment, NUL-separated
   * @param preload the contents of its root's {@code /etc/ld.so.preload}; null writes no root
   */
  record Entry(
      int hostPid,
      int nsPid,
      String name,
      String cgroup,
      String maps,
      String environ,
      String preload) {}

  /** Writes {@code e} under {@code dir}. */
  static void write(Path dir, Entry e) throws IOException {
    Path p = dir.resolve(Integer.toString(e.hostPid()));
    Files.createDirectories(p);
    int pid = e.hostPid();
    Files.writeString(
        p.resolve("stat"),
        pid
            + " ("
            + e.name()
            + ") S 1 "
            + pid
            + " "
            + pid
            + " 0 -1 4194560 2350 0 0 0 12 9 0 0 20 0 1 0 "
            + startTicks(pid)
            + " 12345678 900 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n");
    String chain = pid == e.nsPid() ? Integer.toString(pid) : pid + "\t" + e.nsPid();
    Files.writeString(
        p.resolve("status"),
        "Name:\t"
            + e.name()
            + "\nState:\tS (sleeping)\nTgid:\t"
            + pid
            + "\nPid:\t"
            + pid
            + "\nPPid:\t1\nNStgid:\t"
            + chain
            + "\nNSpid:\t"
            + chain
            + "\nNSpgid:\t"
            + chain
            + "\nNSsid:\t"
            + chain
            + "\nThreads:\t1\n");
    Files.writeString(p.resolve("cgroup"), e.cgroup() + "\n");
    Files.writeString(p.resolve("maps"), e.maps());
    Files.write(p.resolve("environ"), e.environ().getBytes(StandardCharsets.ISO_8859_1));
    if (e.preload() != null) {
      Files.createDirectories(p.resolve("root/etc"));
      Files.writeString(p.resolve("root/etc/ld.so.preload"), e.preload());
    }
  }

  /**
   * The runtime container id of a demo container (64 hex digits), the same in its metadata and in
   * its processes' cgroups.
   */
  static String containerId(String podUid, String container) {
    String seed = Long.toHexString((podUid + "/" + container).hashCode() & 0xffffffffL);
    return (seed + "0".repeat(64)).substring(0, 64);
  }

  /**
   * Field 22 of the process's real stat, so a recorded start time matches; 4242 when unreadable.
   */
  private static long startTicks(int hostPid) {
    try {
      String stat = Files.readString(ProcFs.DEFAULT_ROOT.resolve(hostPid + "/stat"));
      String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ", -1);
      return Long.parseLong(f[19]);
    } catch (IOException | RuntimeException e) {
      return 4242;
    }
  }
}
