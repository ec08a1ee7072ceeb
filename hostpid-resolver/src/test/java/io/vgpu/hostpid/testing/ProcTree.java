package io.vgpu.hostpid.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import java.util.stream.Stream;

/**
 * Writes a fake procfs tree ({@code <root>/<pid>/{stat,status,cgroup}}) the way Linux formats those
 * files, for tests and benchmarks that need many processes or need to change them.
 */
public final class ProcTree {

  private final Path root;

  private ProcTree(Path root) {
    this.root = root;
  }

  /** A tree rooted at {@code root} (created if missing). */
  public static ProcTree at(Path root) {
    try {
      Files.createDirectories(root);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return new ProcTree(root);
  }

  public Path root() {
    return root;
  }

  /** A pod UID derived from {@code n}, with dashes. */
  public static String podUid(int n) {
    String hex = HexFormat.of().formatHex(sha256("pod" + n));
    return hex.substring(0, 8)
        + "-"
        + hex.substring(8, 12)
        + "-4"
        + hex.substring(13, 16)
        + "-a"
        + hex.substring(17, 20)
        + "-"
        + hex.substring(20, 32);
  }

  /** A 64-hex container id derived from {@code n}. */
  public static String containerId(int n) {
    return HexFormat.of().formatHex(sha256("ctr" + n));
  }

  /** A cgroup v2 file for a containerd container under the systemd driver. */
  public static String systemdCgroup(String podUid, String containerId, String qos) {
    String uid = podUid.replace('-', '_');
    String path =
        qos.equals("guaranteed")
            ? "/kubepods.slice/kubepods-pod" + uid + ".slice"
            : "/kubepods.slice/kubepods-"
                + qos
                + ".slice/kubepods-"
                + qos
                + "-pod"
                + uid
                + ".slice";
    return "0::" + path + "/cri-containerd-" + containerId + ".scope\n";
  }

  /** A cgroup v1 file (every controller) for a container under the cgroupfs driver. */
  public static String cgroupfsV1Cgroup(String podUid, String containerId, String qos) {
    String path =
        qos.equals("guaranteed")
            ? "/kubepods/pod" + podUid + "/" + containerId
            : "/kubepods/" + qos + "/pod" + podUid + "/" + containerId;
    List<String> controllers =
        List.of("name=systemd", "pids", "blkio", "memory", "cpuset", "cpuacct", "cpu");
    return IntStream.range(0, controllers.size())
            .mapToObj(i -> (controllers.size() - i) + ":" + controllers.get(i) + ":" + path)
            .collect(Collectors.joining("\n", "", "\n"))
        + "0::/\n";
  }

  /** The cgroup file of a host daemon. */
  public static String hostCgroup() {
    return "0::/system.slice/some.service\n";
  }

  /** Writes (or overwrites) one process. {@code nsPids[0]} must be {@code pid}. */
  public ProcTree process(int pid, long startTime, String cgroup, int... nsPids) {
    return process(pid, startTime, "proc" + pid, cgroup, nsPids);
  }

  /** Writes (or overwrites) one process with a command name. */
  public ProcTree process(int pid, long startTime, String comm, String cgroup, int... nsPids) {
    int[] chain = nsPids.length == 0 ? new int[] {pid} : nsPids;
    write(pid, "stat", stat(pid, comm, 'S', startTime));
    write(pid, "status", status(comm, chain));
    write(pid, "cgroup", cgroup);
    return this;
  }

  /** Replaces one file of a process. */
  public ProcTree write(int pid, String file, String content) {
    try {
      Path dir = root.resolve(Integer.toString(pid));
      Files.createDirectories(dir);
      Files.writeString(dir.resolve(file), content, StandardCharsets.ISO_8859_1);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return this;
  }

  /** Removes a process (as if it exited and was reaped). */
  public ProcTree remove(int pid) {
    Path dir = root.resolve(Integer.toString(pid));
    try (Stream<Path> files = Files.walk(dir)) {
      for (Path p : files.sorted(Comparator.reverseOrder()).toList()) {
        Files.delete(p);
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return this;
  }

  /** A stat line with 52 fields, the start time in field 22. */
  public static String stat(int pid, String comm, char state, long startTime) {
    StringBuilder sb = new StringBuilder(256);
    sb.append(pid).append(" (").append(comm).append(") ").append(state);
    sb.append(" 1 ")
        .append(pid)
        .append(' ')
        .append(pid)
        .append(" 0 -1 4194560 2350 0 0 0 12 9 0 0");
    sb.append(" 20 0 1 0 ").append(startTime);
    sb.append(" 12345678 900 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1");
    sb.append(" 0 0 0 0 0 0 0 0 0 0 0 0 0\n");
    return sb.toString();
  }

  /** A status file in the kernel's layout (tabs, NSpid outermost first) of a root process. */
  public static String status(String name, int... nsPids) {
    return statusOfUser(name, 0, nsPids);
  }

  /**
   * A status file in the kernel's layout whose {@code Uid:} line names {@code uid} four times (no
   * such line when {@code uid} is negative: the fixtures that write none stay as they were).
   */
  public static String statusOfUser(String name, int uid, int... nsPids) {
    String chain =
        IntStream.of(nsPids).mapToObj(Integer::toString).collect(Collectors.joining("\t"));
    String uids = uid < 0 ? "" : "Uid:\t" + uid + "\t" + uid + "\t" + uid + "\t" + uid + "\n";
    return "Name:\t"
        + name
        + "\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t"
        + nsPids[0]
        + "\nNgid:\t0\nPid:\t"
        + nsPids[0]
        + "\nPPid:\t1\nTracerPid:\t0\n"
        + uids
        + "Gid:\t0\t0\t0\t0\nFDSize:\t64\nGroups:\t \n"
        + "NStgid:\t"
        + chain
        + "\nNSpid:\t"
        + chain
        + "\nNSpgid:\t"
        + chain
        + "\nNSsid:\t"
        + chain
        + "\nVmPeak:\t    3060 kB\nVmSize:\t    3060 kB\nVmRSS:\t    1744 kB\nThreads:\t1\n"
        + "SigQ:\t0/96365\nCapEff:\t000001fffeffffff\nCpus_allowed_list:\t0-1\n"
        + "voluntary_ctxt_switches:\t10\nnonvoluntary_ctxt_switches:\t1\n";
  }

  /**
   * A node-like tree: {@code hostProcesses} host daemons and {@code containers} containers in
   * {@code containers / 2} pods (two containers each, one of them the pause container), with {@code
   * processesPerContainer} processes each (in-container pids 1, 2, ...). Host pids start at 1000
   * for containers. Returns the tree.
   */
  public static ProcTree node(
      Path root, int hostProcesses, int containers, int processesPerContainer) {
    ProcTree tree = at(root);
    for (int pid = 1; pid <= hostProcesses; pid++) {
      tree.process(pid, 100 + pid, hostCgroup(), pid);
    }
    int hostPid = Math.max(1000, hostProcesses + 1);
    String[] qos = {"besteffort", "burstable", "guaranteed"};
    for (int c = 0; c < containers; c++) {
      String pod = podUid(c / 2);
      String ctr = containerId(c);
      String q = qos[(c / 2) % qos.length];
      String cgroup = c % 4 < 2 ? systemdCgroup(pod, ctr, q) : cgroupfsV1Cgroup(pod, ctr, q);
      for (int inner = 1; inner <= processesPerContainer; inner++) {
        tree.process(hostPid, 5000L + hostPid, cgroup, hostPid, inner);
        hostPid++;
      }
    }
    return tree;
  }

  private static byte[] sha256(String s) {
    try {
      return java.security.MessageDigest.getInstance("SHA-256")
          .digest(s.getBytes(StandardCharsets.UTF_8));
    } catch (java.security.NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
