package io.vgpu.hostpid.testing;

import io.vgpu.hostpid.ProcFs;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * Starts real processes in fresh PID namespaces with {@code unshare --pid --fork --mount-proc}
 * (root only) and places them in throwaway cgroup v1 directories shaped like kubelet's, so tests
 * can resolve them through the real {@code /proc}. Everything is undone by {@link #close()}.
 */
public final class PidNamespaces implements AutoCloseable {

  /** cgroup v1 hierarchies to try, in order; a test pod only needs one of them. */
  private static final List<String> HIERARCHIES =
      List.of("pids", "cpu", "cpuacct", "freezer", "devices", "blkio", "memory", "cpuset");

  private final List<Process> started = new ArrayList<>();
  private final List<List<Integer>> chains = new ArrayList<>();
  private final List<Path> createdDirs = new ArrayList<>();

  /** Why real namespaces cannot run here, or empty when they can. */
  public static Optional<String> unavailableReason() {
    try {
      Object uid = Files.getAttribute(ProcFs.DEFAULT_ROOT.resolve("self"), "unix:uid");
      if (!Integer.valueOf(0).equals(uid)) {
        return Optional.of(
            "needs root for unshare --pid --mount-proc (running as uid " + uid + ")");
      }
      Process probe =
          new ProcessBuilder("unshare", "--pid", "--fork", "--mount-proc", "true")
              .redirectErrorStream(true)
              .start();
      if (!probe.waitFor(10, TimeUnit.SECONDS)) {
        probe.destroyForcibly();
        return Optional.of("unshare did not finish within 10 s");
      }
      if (probe.exitValue() != 0) {
        return Optional.of(
            "unshare --pid --fork --mount-proc failed: "
                + new String(
                        probe.getInputStream().readAllBytes(),
                        java.nio.charset.StandardCharsets.UTF_8)
                    .strip());
      }
      return Optional.empty();
    } catch (IOException | UnsupportedOperationException e) {
      return Optional.of("cannot run unshare: " + e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return Optional.of("interrupted");
    }
  }

  /**
   * Runs {@code sleep} nested {@code levels} PID namespaces deep and returns the host pids of the
   * chain's processes, outermost namespace's init first: element {@code i} is pid 1 of the
   * namespace at depth {@code i + 1}; the last one is the {@code sleep}.
   */
  public List<Integer> start(int levels) throws IOException, InterruptedException {
    List<String> command = new ArrayList<>();
    for (int i = 0; i < levels; i++) {
      command.addAll(List.of("unshare", "--pid", "--fork", "--mount-proc", "--kill-child"));
    }
    command.addAll(List.of("sleep", "120"));
    Process launcher = new ProcessBuilder(command).redirectErrorStream(true).start();
    started.add(launcher);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (System.nanoTime() < deadline) {
      List<Integer> chain = chainBelow(launcher.pid(), levels);
      if (chain.size() == levels && isExecuted(chain.getLast(), "sleep")) {
        chains.add(chain);
        return chain;
      }
      Thread.sleep(20);
    }
    throw new IllegalStateException("namespace chain of " + levels + " did not come up");
  }

  /** Each level's init: the only child of the previous level's unshare. */
  private static List<Integer> chainBelow(long launcherPid, int levels) {
    List<Integer> chain = new ArrayList<>();
    long parent = launcherPid;
    for (int i = 0; i < levels; i++) {
      Optional<ProcessHandle> child =
          ProcessHandle.of(parent).flatMap(h -> h.children().findFirst());
      if (child.isEmpty()) {
        break;
      }
      chain.add((int) child.get().pid());
      parent = child.get().pid();
    }
    return chain;
  }

  private static boolean isExecuted(int pid, String name) {
    try {
      return Files.readString(ProcFs.host().path(pid, "comm")).strip().equals(name);
    } catch (IOException e) {
      return false;
    }
  }

  /**
   * Moves {@code hostPid} into {@code kubepods/besteffort/pod<uid>/<containerId>} of the first
   * cgroup v1 hierarchy that accepts it; empty (with nothing left behind) when none does.
   */
  public Optional<String> placeInPod(int hostPid, String podUid, String containerId) {
    for (String hierarchy : HIERARCHIES) {
      Path mount = Path.of("/sys/fs/cgroup", hierarchy);
      if (!Files.isRegularFile(mount.resolve("cgroup.procs"))) {
        continue;
      }
      Path leaf = mount.resolve("kubepods/besteffort/pod" + podUid + "/" + containerId);
      try {
        createDirectories(mount, leaf);
        Files.writeString(leaf.resolve("cgroup.procs"), Integer.toString(hostPid));
        return Optional.of(hierarchy);
      } catch (IOException e) {
        // try the next hierarchy
      }
    }
    return Optional.empty();
  }

  /** Kills a started chain from the innermost process outwards, so each parent reaps its child. */
  public void kill(List<Integer> chain) throws InterruptedException {
    for (int i = chain.size() - 1; i >= 0; i--) {
      Optional<ProcessHandle> handle = ProcessHandle.of(chain.get(i));
      if (handle.isPresent()) {
        handle.get().destroyForcibly();
        handle.get().onExit().completeOnTimeout(null, 5, TimeUnit.SECONDS).join();
      }
    }
  }

  private void createDirectories(Path mount, Path leaf) throws IOException {
    List<Path> missing = new ArrayList<>();
    for (Path p = leaf; !p.equals(mount) && !Files.isDirectory(p); p = p.getParent()) {
      missing.addFirst(p);
    }
    for (Path p : missing) {
      Files.createDirectory(p);
      createdDirs.add(p);
    }
  }

  @Override
  public void close() {
    try {
      cleanUp();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private void cleanUp() throws InterruptedException {
    for (List<Integer> chain : chains) {
      kill(chain);
    }
    for (Process launcher : started) {
      launcher.destroyForcibly();
      launcher.waitFor(10, TimeUnit.SECONDS);
    }
    // a cgroup can be removed once its last task is reaped; that may take a moment
    for (Path dir : createdDirs.reversed()) {
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
      while (Files.exists(dir)) {
        try {
          Files.delete(dir);
        } catch (IOException e) {
          if (System.nanoTime() > deadline) {
            break;
          }
          Thread.sleep(20);
        }
      }
    }
  }
}
