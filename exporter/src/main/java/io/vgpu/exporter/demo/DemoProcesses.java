package io.vgpu.exporter.demo;

import io.vgpu.hostpid.ProcFs;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.stream.Stream;

/** The demo's real processes: sleepers blocked on a pipe from the JVM, as a pod's would be. */
final class DemoProcesses {
  private DemoProcesses() {}

  /**
   * Starts a process blocked on its stdin. As root the first process of a container is pid 1 of a
   * new PID namespace and {@code sibling} names that first process: the next ones join its
   * namespace, as the processes of one container do.
   */
  static DemoContainer.Child spawn(boolean namespaces, DemoContainer.Child sibling)
      throws IOException {
    // The child blocks reading its stdin, a pipe from this JVM: if the JVM dies without cleanup
    // the pipe closes, the child exits, and --kill-child takes the namespace down with it.
    List<String> cmd = new ArrayList<>();
    if (namespaces && sibling == null) {
      cmd.addAll(List.of("unshare", "--pid", "--fork", "--kill-child", "--mount-proc"));
    } else if (namespaces) {
      cmd.addAll(
          List.of("nsenter", "--target", Integer.toString(sibling.hostPid()), "--pid", "--"));
    }
    cmd.addAll(List.of("sh", "-c", "read _"));
    Process p =
        new ProcessBuilder(cmd)
            .redirectErrorStream(true)
            .redirectOutput(ProcessBuilder.Redirect.DISCARD)
            .start();
    int hostPid = (int) p.pid();
    int nsPid = hostPid;
    if (namespaces) {
      // unshare and nsenter fork: the sleeper is their child, in the container's namespace.
      for (int i = 0; i < 200; i++) {
        Optional<ProcessHandle> child = p.children().findFirst();
        if (child.isPresent()) {
          hostPid = (int) child.get().pid();
          nsPid = innermostPid(hostPid).orElse(hostPid);
          break;
        }
        try {
          Thread.sleep(10);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          break;
        }
      }
    }
    return new DemoContainer.Child(p, hostPid, nsPid);
  }

  /** Ends a child for good (SIGKILL, reaped): its pids are those of a process that is gone. */
  static void kill(DemoContainer.Child c) {
    c.process().descendants().forEach(ProcessHandle::destroyForcibly);
    c.process().destroyForcibly();
    try {
      c.process().waitFor(5, java.util.concurrent.TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** The demo's children are real processes: read through the host's procfs like any other. */
  private static final ProcFs HOST_PROC = ProcFs.host();

  private static OptionalInt innermostPid(int hostPid) {
    return HOST_PROC
        .readProcess(hostPid)
        .map(p -> OptionalInt.of(p.innermostPid()))
        .orElse(OptionalInt.empty());
  }

  /**
   * Whether children can get PID namespaces of their own: root, with {@code unshare} and {@code
   * nsenter} installed.
   */
  static boolean canUseNamespaces() {
    try {
      Object uid = Files.getAttribute(Path.of("/proc/self"), "unix:uid");
      return uid instanceof Integer u
          && u == 0
          && Stream.of("unshare", "nsenter")
              .allMatch(
                  tool ->
                      Stream.of("/usr/bin/", "/bin/")
                          .anyMatch(dir -> Files.isExecutable(Path.of(dir + tool))));
    } catch (IOException | UnsupportedOperationException | IllegalArgumentException e) {
      return false;
    }
  }

  /**
   * Stops every child at once and reaps it. Kills the sleeper (a namespace's init takes the rest of
   * it along) and lets unshare or nsenter reap it, so nothing is left defunct. Without a namespace
   * the process is the sleeper itself: signalled first, all of them, the wait below does not spend
   * a second on each (minutes for a 128-container node).
   */
  static void stopAll(List<DemoContainer.Child> children) {
    for (DemoContainer.Child c : children) {
      c.process().descendants().forEach(ProcessHandle::destroyForcibly);
      c.process().destroyForcibly();
    }
    for (DemoContainer.Child c : children) {
      try {
        if (!c.process().waitFor(1, java.util.concurrent.TimeUnit.SECONDS)) {
          c.process().destroyForcibly();
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        c.process().destroyForcibly();
      }
    }
  }
}
