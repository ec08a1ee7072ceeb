package io.vgpu.hostpid.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * One process directory of a {@link ProcTree}, built field by field and written by {@link #write}:
 * {@code stat}, {@code status} (NSpid; a {@code Uid:} line only when {@link #uid} is set), {@code
 * cgroup} (a pod's, or a host service's), and, when asked, {@code maps}, {@code environ} and the
 * container root's {@code etc/ld.so.preload}, each as Linux formats it. The one procfs fixture
 * writer of every module's tests (hostpid-resolver's test-jar).
 */
public final class ProcEntry {
  /** The environment every written {@code environ} starts with. */
  public static final String BASE_ENVIRON = "PATH=/usr/bin\0HOME=/root\0";

  private final ProcTree tree;
  public final int hostPid;

  /** The NSpid chain, outermost (the host pid) first. */
  private int[] nsPids;

  public String comm = "python3";
  public long start = 4242;

  /** The {@code Uid:} line's four ids; negative writes no such line. */
  public int uid = -1;

  public String podUid = ProcTree.podUid(0);

  /** The container's 64-hex id; derived from the host pid unless set. */
  public String containerId;

  public String qos = "besteffort";

  /** The whole {@code cgroup} file; null derives it from the pod, container and QoS. */
  public String cgroup;

  /** {@code maps} lines; the file is written when {@link #writeMaps} (set by every maps method). */
  public final List<String> maps = new ArrayList<>();

  public boolean writeMaps;

  /** Variables added to {@link #BASE_ENVIRON}; {@code environ} is written when {@link #environ}. */
  public final Map<String, String> env = new HashMap<>();

  public boolean environ;

  /** Creates {@code root/etc} (the container's filesystem as {@code /proc/<pid>/root} shows it). */
  public boolean containerRoot;

  /** {@code root/etc/ld.so.preload}'s content; null removes it. */
  public String ldSoPreload;

  /**
   * A process of {@code tree} to build and {@link #write}: host pid {@code hostPid}, pid {@code
   * containerPid} inside its container (equal: in the host's namespace only).
   */
  public static ProcEntry in(ProcTree tree, int hostPid, int containerPid) {
    return new ProcEntry(tree, hostPid, containerPid);
  }

  private ProcEntry(ProcTree tree, int hostPid, int containerPid) {
    this.tree = tree;
    this.hostPid = hostPid;
    this.nsPids = hostPid == containerPid ? new int[] {hostPid} : new int[] {hostPid, containerPid};
    this.containerId = "%064x".formatted(hostPid);
  }

  /** The whole NSpid chain (any depth), outermost first; {@code chain[0]} is the host pid. */
  public ProcEntry nsPids(int... chain) {
    if (chain.length == 0 || chain[0] != hostPid) {
      throw new IllegalArgumentException("the chain starts with the host pid " + hostPid);
    }
    this.nsPids = chain.clone();
    return this;
  }

  public ProcEntry comm(String name) {
    this.comm = name;
    return this;
  }

  public ProcEntry start(long ticks) {
    this.start = ticks;
    return this;
  }

  public ProcEntry uid(int id) {
    this.uid = id;
    return this;
  }

  /** In pod {@code uid} (its container {@link #containerId}, QoS {@link #qos}). */
  public ProcEntry pod(String uid) {
    this.podUid = uid;
    return this;
  }

  public ProcEntry container(String id) {
    this.containerId = id;
    return this;
  }

  public ProcEntry qos(String level) {
    this.qos = level;
    return this;
  }

  /** The whole {@code cgroup} file (a line ending in a newline, as the kernel writes it). */
  public ProcEntry cgroup(String content) {
    this.cgroup = content;
    return this;
  }

  /** A host daemon's cgroup ({@code 0::/system.slice/<service>}): not in any pod. */
  public ProcEntry hostService(String service) {
    return cgroup("0::/system.slice/" + service + "\n");
  }

  /** A process outside Kubernetes' cgroups (a plain container runtime's, the demo's). */
  public ProcEntry outsidePods() {
    return hostService("containerd.service");
  }

  public ProcEntry mapsLine(String line) {
    maps.add(line);
    writeMaps = true;
    return this;
  }

  /** Writes {@code maps} even with no line (a process that maps nothing of interest). */
  public ProcEntry withMaps() {
    writeMaps = true;
    return this;
  }

  /** Maps region {@code region} as a HAMi-core process maps its container's cache file. */
  public ProcEntry mapsRegion(Path region) {
    return mapsLine(regionMapping(region));
  }

  public ProcEntry mapsLibcuda() {
    return mapsLine(libcudaMapping());
  }

  public ProcEntry mapsLibvgpu(String path, long inode) {
    return mapsLine(libvgpuMapping(path, inode));
  }

  /** A typical limited GPU process: libcuda, libvgpu, the region. */
  public ProcEntry gpu(Path region) {
    return mapsLibcuda().mapsLibvgpu("/usr/local/vgpu/libvgpu.so", 9001).mapsRegion(region);
  }

  /** Adds one variable to {@code environ} (and writes it). */
  public ProcEntry env(String key, String value) {
    env.put(key, value);
    environ = true;
    return this;
  }

  /** Writes {@code environ} ({@link #BASE_ENVIRON} and {@link #env}). */
  public ProcEntry withEnviron() {
    environ = true;
    return this;
  }

  public ProcEntry withContainerRoot() {
    containerRoot = true;
    return this;
  }

  /** The container's {@code /etc/ld.so.preload} (its root is created). */
  public ProcEntry preload(String content) {
    containerRoot = true;
    ldSoPreload = content;
    return this;
  }

  public ProcEntry noPreload() {
    ldSoPreload = null;
    return this;
  }

  /** Writes (or overwrites) the process's files; returns its directory. */
  public Path write() {
    Path dir = tree.root().resolve(Integer.toString(hostPid));
    String cgroupFile = cgroup != null ? cgroup : ProcTree.systemdCgroup(podUid, containerId, qos);
    tree.write(hostPid, "stat", ProcTree.stat(hostPid, comm, 'S', start));
    tree.write(hostPid, "status", ProcTree.statusOfUser(comm, uid, nsPids));
    tree.write(hostPid, "cgroup", cgroupFile);
    try {
      if (writeMaps) {
        tree.write(hostPid, "maps", String.join("\n", maps) + "\n");
      }
      if (environ) {
        StringBuilder text = new StringBuilder(BASE_ENVIRON);
        env.forEach((k, v) -> text.append(k).append('=').append(v).append('\0'));
        tree.write(hostPid, "environ", text.toString());
      }
      if (containerRoot) {
        Files.createDirectories(dir.resolve("root/etc"));
        Path preload = dir.resolve("root/etc/ld.so.preload");
        if (ldSoPreload != null) {
          Files.writeString(preload, ldSoPreload, StandardCharsets.ISO_8859_1);
        } else {
          Files.deleteIfExists(preload);
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return dir;
  }

  /** The inode of {@code file} (not following a link), as {@code maps} shows it. */
  public static long inode(Path file) {
    try {
      return ((Number) Files.getAttribute(file, "unix:ino", LinkOption.NOFOLLOW_LINKS)).longValue();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * A shared read-write mapping of region {@code region}, shown where the container sees it ({@code
   * /usr/local/vgpu/<name>}), with the file's inode.
   */
  public static String regionMapping(Path region) {
    return "7f0000000000-7f00001ea000 rw-s 00000000 00:2a "
        + inode(region)
        + "                 /usr/local/vgpu/"
        + region.getFileName();
  }

  /** The driver's libcuda, mapped executable. */
  public static String libcudaMapping() {
    return "7f2000000000-7f2002000000 r-xp 00000000 08:01 777                 "
        + "/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04";
  }

  /** A library at {@code path} with inode {@code inode}, mapped executable. */
  public static String libvgpuMapping(String path, long inode) {
    return "7f1000000000-7f1000100000 r-xp 00000000 08:01 " + inode + "                 " + path;
  }
}
