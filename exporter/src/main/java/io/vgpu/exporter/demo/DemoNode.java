package io.vgpu.exporter.demo;

import io.vgpu.exporter.k8s.ContainerMeta;
import io.vgpu.exporter.k8s.NodeMeta;
import io.vgpu.exporter.k8s.PodMeta;
import io.vgpu.exporter.k8s.StaticMetadataSource;
import io.vgpu.hostpid.ProcFs;
import io.vgpu.regioncodec.DeviceUsage;
import io.vgpu.regioncodec.ExtensionDevice;
import io.vgpu.regioncodec.Layout;
import io.vgpu.regioncodec.RegionExtension;
import io.vgpu.regioncodec.RegionFile;
import io.vgpu.regioncodec.RegionSpec;
import io.vgpu.regioncodec.RegionWriter;
import io.vgpu.regioncodec.SlotExtension;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.Random;
import java.util.UUID;
import java.util.stream.Stream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A simulated GPU node: container directories with v1.2 + extension cache files whose slots belong
 * to real child processes (a shell blocked on its stdin, each in its own PID namespace via {@code
 * unshare --pid --fork --mount-proc} when running as root, so slot pids are namespace pids as in a
 * real pod), usage that changes every {@link #tick()}, and fake pod metadata. Also one pod that
 * finished and one directory whose pod is gone (stale), so every lifecycle state shows.
 */
public final class DemoNode implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(DemoNode.class);
  private static final long MIB = 1L << 20;
  private static final long LAST_KERNEL_OFFSET = 2_008_912L;
  private static final long EXT_DEVICES_OFFSET = 2_008_960L + 448L;

  /** Most GPUs a demo node can have (the fake NVML's device limit). */
  public static final int MAX_GPUS = 16;

  /** Most running containers a demo node can have. */
  public static final int MAX_CONTAINERS = 256;

  /** The demo's GPU UUIDs: index {@code g} is {@code GPU-5d0d3c6a-<g:04x>-4d3e-9a43-<g:012x>}. */
  public static String gpuUuid(int g) {
    return "GPU-5d0d3c6a-%04x-4d3e-9a43-%012x".formatted(g, g);
  }

  /** One simulated container. */
  private record Sim(
      String podUid,
      String namespace,
      String pod,
      String container,
      Path file,
      List<Integer> devices,
      long limitBytes,
      int smLimit,
      List<Child> children,
      double phase,
      boolean idle) {}

  /** A real child process and its pid as its namespace sees it. */
  private record Child(Process process, int hostPid, int nsPid) {}

  private final Path root;
  private final boolean namespaces;
  private final List<String> gpus;
  private final long startEpochSeconds = Instant.now().getEpochSecond();
  private final List<Sim> sims = new ArrayList<>();
  private final StaticMetadataSource metadata;
  private final Random random = new Random(42);
  private long ticks;
  private final FakeGpuEnergy energy = new FakeGpuEnergy();

  private DemoNode(Path root, boolean namespaces, int gpus) {
    this.root = root;
    this.namespaces = namespaces;
    this.gpus = java.util.stream.IntStream.range(0, gpus).mapToObj(DemoNode::gpuUuid).toList();
    this.metadata = StaticMetadataSource.of(List.of(), demoNodeMeta(gpus));
  }

  /**
   * Creates the default node (2 GPUs, 1 to 3 processes per container) under {@code root}.
   *
   * @param containers how many running containers to simulate (1-{@value #MAX_CONTAINERS})
   */
  public static DemoNode create(Path root, int containers) throws IOException {
    return create(root, containers, 2, 0, 0, true);
  }

  /**
   * Creates the node under {@code root} (created if missing).
   *
   * @param containers how many running containers to simulate (1-{@value #MAX_CONTAINERS})
   * @param gpus GPUs of the node (1-{@value #MAX_GPUS}); every third container uses two of them,
   *     the others one, spread evenly
   * @param processesPerContainer live processes of each running container (1-3), or 0 for 1 to 3
   *     varying by container (the default node)
   * @param idleContainers how many of the running containers (the last ones) hold memory but launch
   *     no kernels: their last kernel is two hours before the node started (an idle notebook, a
   *     leak), their SM utilization 0
   * @param pidNamespaces put each process in its own PID namespace when running as root (as in a
   *     real pod); false spawns plain processes, which starts many demo nodes on one machine much
   *     faster
   */
  public static DemoNode create(
      Path root,
      int containers,
      int gpus,
      int processesPerContainer,
      int idleContainers,
      boolean pidNamespaces)
      throws IOException {
    if (containers < 1 || containers > MAX_CONTAINERS) {
      throw new IllegalArgumentException(
          "containers must be 1-" + MAX_CONTAINERS + ", was " + containers);
    }
    if (gpus < 1 || gpus > MAX_GPUS) {
      throw new IllegalArgumentException("gpus must be 1-" + MAX_GPUS + ", was " + gpus);
    }
    if (processesPerContainer < 0 || processesPerContainer > 3) {
      throw new IllegalArgumentException(
          "processes per container must be 0 (varying) or 1-3, was " + processesPerContainer);
    }
    if (idleContainers < 0 || idleContainers > containers) {
      throw new IllegalArgumentException(
          "idle containers must be 0-" + containers + ", was " + idleContainers);
    }
    Files.createDirectories(root);
    boolean ns = pidNamespaces && canUseNamespaces();
    DemoNode node = new DemoNode(root, ns, gpus);
    LOG.atInfo()
        .setMessage("demo node")
        .addKeyValue("root", root)
        .addKeyValue("containers", containers)
        .addKeyValue("gpus", gpus)
        .addKeyValue("pid_namespaces", ns)
        .log();
    String[][] names = {
      {"ml", "train-resnet-0", "trainer"},
      {"ml", "train-resnet-0", "sidecar-logger"},
      {"inference", "llm-serve-7f9c", "server"},
      {"inference", "embed-serve-5b2d", "server"},
      {"research", "notebook-alice", "jupyter"},
      {"research", "batch-sweep-3", "worker"},
    };
    for (int i = 0; i < containers; i++) {
      String[] n = names[i % names.length];
      String pod = i < names.length ? n[1] : n[1] + "-" + i;
      String uid =
          UUID.nameUUIDFromBytes(("demo-" + pod).getBytes(java.nio.charset.StandardCharsets.UTF_8))
              .toString();
      // With 2 GPUs: every third container on both, the others alternating (the default node).
      int first = (2 * (i / 3)) % gpus;
      List<Integer> devs =
          i % 3 == 0 && gpus > 1 ? List.of(first, (first + 1) % gpus) : List.of(i % gpus);
      node.addContainer(
          uid,
          n[0],
          pod,
          n[2],
          devs,
          (2L + i % 4) * 1024 * MIB,
          20 + 10 * (i % 5),
          processesPerContainer == 0 ? 1 + i % 3 : processesPerContainer,
          "Running",
          i >= containers - idleContainers);
    }
    // A finished pod (Succeeded) whose directory is still there: exported as finished, no usage.
    node.addContainer(
        UUID.nameUUIDFromBytes("demo-finished".getBytes(java.nio.charset.StandardCharsets.UTF_8))
            .toString(),
        "ml",
        "preprocess-done",
        "job",
        List.of(0),
        1024 * MIB,
        50,
        0,
        "Succeeded",
        false);
    // A directory whose pod no longer exists: exported as stale after the grace period.
    node.addContainer(
        UUID.nameUUIDFromBytes("demo-gone".getBytes(java.nio.charset.StandardCharsets.UTF_8))
            .toString(),
        null,
        "deleted-pod",
        "main",
        List.of(1 % gpus),
        1024 * MIB,
        100,
        0,
        null,
        false);
    node.tick();
    return node;
  }

  private static boolean canUseNamespaces() {
    try {
      Object uid = Files.getAttribute(Path.of("/proc/self"), "unix:uid");
      return uid instanceof Integer u
          && u == 0
          && Stream.of("/usr/bin/unshare", "/bin/unshare")
              .anyMatch(p -> Files.isExecutable(Path.of(p)));
    } catch (IOException | UnsupportedOperationException | IllegalArgumentException e) {
      return false;
    }
  }

  private static NodeMeta demoNodeMeta(int gpus) {
    return new NodeMeta(
        true,
        Optional.of(Instant.now()),
        Optional.of("Reported_demo"),
        OptionalInt.of(gpus),
        false);
  }

  private void addContainer(
      String uid,
      String namespace,
      String pod,
      String container,
      List<Integer> devices,
      long limit,
      int smLimit,
      int processes,
      String phase,
      boolean idle)
      throws IOException {
    Path dir = root.resolve(uid + "_" + container);
    Files.createDirectories(dir);
    Path file = dir.resolve(UUID.randomUUID() + ".cache");
    List<Child> children = new ArrayList<>();
    for (int p = 0; p < processes; p++) {
      children.add(spawn());
    }
    RegionSpec.Builder spec = RegionSpec.builder(Layout.V1_2);
    List<ExtensionDevice> ext = new ArrayList<>();
    for (int d = 0; d < devices.size(); d++) {
      spec.device(gpus.get(devices.get(d)), limit, smLimit);
      ext.add(ExtensionDevice.zero(d));
    }
    spec.extension(
        new RegionExtension(
            1, 0, 0, System.currentTimeMillis() * 1_000_000L, "demo", uid, container, 0, 0, ext));
    spec.priority(1).utilizationSwitch(1).recentKernel(0);
    RegionWriter.create(file, spec.build());
    Sim sim =
        new Sim(
            uid,
            namespace,
            pod,
            container,
            file,
            devices,
            limit,
            smLimit,
            children,
            random.nextDouble() * 6.28,
            idle);
    sims.add(sim);
    if (namespace != null) {
      ContainerMeta cm =
          new ContainerMeta(
              container,
              container.startsWith("sidecar")
                  ? ContainerMeta.Kind.SIDECAR
                  : ContainerMeta.Kind.REGULAR,
              Optional.of(FakeProcfs.containerId(uid, container)),
              phase.equals("Running")
                  ? ContainerMeta.State.RUNNING
                  : ContainerMeta.State.TERMINATED);
      PodMeta existing = metadata.pod(uid).orElse(null);
      Map<String, ContainerMeta> cs =
          new java.util.HashMap<>(existing == null ? Map.of() : existing.containers());
      cs.put(container, cm);
      metadata.put(
          new PodMeta(
              uid,
              namespace,
              pod,
              phase,
              Optional.of("burstable"),
              Map.of("app", pod.replaceAll("-[0-9a-f]+$", "")),
              cs));
    }
  }

  private Child spawn() throws IOException {
    // The child blocks reading its stdin, a pipe from this JVM: if the JVM dies without cleanup
    // the pipe closes, the child exits, and --kill-child takes the namespace down with it.
    List<String> sleeper = List.of("sh", "-c", "read _");
    List<String> cmd = new ArrayList<>();
    if (namespaces) {
      cmd.addAll(List.of("unshare", "--pid", "--fork", "--kill-child", "--mount-proc"));
    }
    cmd.addAll(sleeper);
    Process p =
        new ProcessBuilder(cmd)
            .redirectErrorStream(true)
            .redirectOutput(ProcessBuilder.Redirect.DISCARD)
            .start();
    int hostPid = (int) p.pid();
    int nsPid = hostPid;
    if (namespaces) {
      // unshare forks: the sleeper is its child, pid 1 of the new namespace.
      for (int i = 0; i < 100; i++) {
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
    return new Child(p, hostPid, nsPid);
  }

  private static OptionalInt innermostPid(int hostPid) {
    try {
      for (String line : Files.readAllLines(ProcFs.DEFAULT_ROOT.resolve(hostPid + "/status"))) {
        if (line.startsWith("NSpid:")) {
          String[] f = line.substring(6).trim().split("\\s+");
          return OptionalInt.of(Integer.parseInt(f[f.length - 1]));
        }
      }
    } catch (IOException | NumberFormatException e) {
      return OptionalInt.empty();
    }
    return OptionalInt.empty();
  }

  public Path root() {
    return root;
  }

  public StaticMetadataSource metadata() {
    return metadata;
  }

  /** Whether children run in their own PID namespaces. */
  public boolean namespaces() {
    return namespaces;
  }

  /** Host pids of every child process (for tests and the resolver). */
  public List<Integer> childHostPids() {
    return sims.stream().flatMap(s -> s.children().stream()).map(Child::hostPid).toList();
  }

  /**
   * Advances the simulation one step: memory and utilization move, kernels launch, counters grow.
   */
  public synchronized void tick() throws IOException {
    ticks++;
    long now = Instant.now().getEpochSecond();
    for (Sim s : sims) {
      try (RegionFile rf = RegionFile.openReadWrite(s.file())) {
        RegionWriter w = rf.writer();
        int slot = 0;
        for (Child c : s.children()) {
          List<DeviceUsage> usage = new ArrayList<>();
          for (int d = 0; d < s.devices().size(); d++) {
            double wave = 0.5 + 0.4 * Math.sin(s.phase() + ticks / 3.0 + slot + d);
            long context = 300 * MIB;
            long module = 20 * MIB;
            long data =
                (long) (s.limitBytes() * 0.6 / Math.max(1, s.children().size()) * wave) / MIB * MIB;
            long util =
                s.idle()
                    ? 0
                    : Math.max(
                        0,
                        Math.min(
                            100,
                            Math.round(s.smLimit() * (0.6 + 0.4 * Math.sin(ticks / 5.0 + slot)))));
            usage.add(
                new DeviceUsage(
                    d,
                    context,
                    module,
                    data,
                    context + module + data,
                    context + module + data,
                    util));
          }
          // HAMi-core records the namespace pid as hostpid when it cannot see the host (the
          // zero-utilization bug); half of the demo containers reproduce that.
          int recordedHostPid = s.podUid().charAt(0) < '8' ? c.nsPid() : c.hostPid();
          w.putSlot(
              slot,
              RegionSpec.SlotSpec.of(c.nsPid(), recordedHostPid, 1, usage)
                  .withExtension(
                      new SlotExtension(
                          0,
                          System.currentTimeMillis() * 1_000_000L,
                          SlotExtension.HOSTPID_UNKNOWN)));
          slot++;
        }
        w.setProcNum(s.children().size());
      }
      try (FileChannel ch = FileChannel.open(s.file(), StandardOpenOption.WRITE)) {
        ByteBuffer b = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
        if (!s.children().isEmpty()) {
          long lastKernel = s.idle() ? startEpochSeconds - 7200 : now;
          ch.write(b.putLong(0, lastKernel).rewind(), LAST_KERNEL_OFFSET);
        }
        for (int d = 0; d < s.devices().size(); d++) {
          long base = EXT_DEVICES_OFFSET + d * 64L;
          ch.write(b.putLong(0, ticks / 7).rewind(), base); // oom_rejections
          ch.write(
              b.putLong(0, ticks * 150_000_000L * s.children().size()).rewind(),
              base + 16); // throttled ns
          ch.write(
              b.putLong(0, ticks * 3L * s.children().size()).rewind(),
              base + 24); // launches delayed
          ch.write(
              b.putLong(0, ticks * 40L * s.children().size()).rewind(),
              base + 32); // launches total
          ch.write(b.putLong(0, ticks * 90_000_000L).rewind(), base + 40); // limiter busy ns
        }
      }
    }
  }

  /**
   * Writes a procfs for the exporter that shows the demo's processes and nothing else of this
   * machine: for each child, {@code <dir>/<host pid>/{stat,status,cgroup,maps,environ}} formatted
   * as Linux formats them, with a Kubernetes pod cgroup naming its simulated pod, its namespace pid
   * chain, and maps of libcuda, libvgpu and its container's region (by inode). Serving the demo
   * with {@code --path.procfs=<dir>} makes attribution, liveness and the status page judge the demo
   * pods as on a real node, and keeps the machine's own processes (and any real pods on it) out.
   * Written once: the children only sleep, so their files do not change.
   */
  public synchronized void writeProcfs(Path dir) throws IOException {
    Files.createDirectories(dir);
    for (Sim s : sims) {
      long inode =
          ((Number)
                  Files.getAttribute(s.file(), "unix:ino", java.nio.file.LinkOption.NOFOLLOW_LINKS))
              .longValue();
      String cgroup =
          "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
              + s.podUid().replace('-', '_')
              + ".slice/cri-containerd-"
              + FakeProcfs.containerId(s.podUid(), s.container())
              + ".scope";
      String maps =
          "7f2000000000-7f2002000000 r-xp 00000000 08:01 777                 /usr/lib/x86_64-linux-gnu/libcuda.so.1\n"
              + "7f1000000000-7f1000100000 r-xp 00000000 08:01 9001                /usr/local/vgpu/libvgpu.so\n"
              + "7f0000000000-7f00001ea000 rw-s 00000000 00:2a "
              + inode
              + "                 /usr/local/vgpu/"
              + s.file().getFileName()
              + "\n";
      for (Child c : s.children()) {
        FakeProcfs.write(
            dir,
            new FakeProcfs.Entry(
                c.hostPid(),
                c.nsPid(),
                "python3",
                cgroup,
                maps,
                "PATH=/usr/bin\0HOME=/root\0",
                "/usr/local/vgpu/libvgpu.so\n"));
      }
    }
    // This JVM as the fake NVML's GPU process of no container: a host process outside every pod
    // cgroup, so attribution counts it as the host's, not a tenant's.
    int self = (int) ProcessHandle.current().pid();
    FakeProcfs.write(
        dir,
        new FakeProcfs.Entry(
            self,
            self,
            "java",
            "0::/system.slice/vgpu-demo.service",
            "7f2000000000-7f2002000000 r-xp 00000000 08:01 777                 /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1\n",
            "",
            null));
  }

  /**
   * Writes a script for the repository's fake libnvidia-ml ({@code FAKE_NVML_CONFIG}, see
   * libvgpu/test/fake/fake_nvml.c) that matches this node: its GPUs as {@code model}, every child
   * process of a running container as a compute process with a fresh utilization sample (none for
   * idle containers), and this JVM as a GPU process of no container (unattributed). Written to a
   * sibling and renamed, so the library never reads half a file.
   *
   * @param model GPU name without blanks (e.g. NVIDIA_H100_80GB_HBM3); a "<n>GB" in it sets the
   *     memory total
   */
  public synchronized void writeFakeNvmlScript(Path file, String model) throws IOException {
    if (!model.matches("[A-Za-z0-9_.-]{1,64}")) {
      throw new IllegalArgumentException("GPU model must be 1-64 of [A-Za-z0-9_.-]: " + model);
    }
    java.util.regex.Matcher gb = java.util.regex.Pattern.compile("(\\d+)GB").matcher(model);
    long total = (gb.find() ? Long.parseLong(gb.group(1)) : 80) << 30;
    long nowMicros = System.currentTimeMillis() * 1000;
    long[] used = new long[gpus.size()];
    int[] util = new int[gpus.size()];
    StringBuilder procs = new StringBuilder();
    for (Sim s : sims) {
      for (Child c : s.children()) {
        int dev = s.devices().get(c.hostPid() % s.devices().size());
        long bytes = s.limitBytes() / 2;
        used[dev] += bytes;
        procs.append("process %d pid=%d used=%d%n".formatted(dev, c.hostPid(), bytes));
        if (!s.idle()) {
          int sm = 5 + Math.floorMod(c.hostPid() + (int) ticks, 20);
          util[dev] += sm;
          procs.append(
              "sample %d pid=%d sm=%d mem=5 ts=%d%n".formatted(dev, c.hostPid(), sm, nowMicros));
        }
      }
    }
    long self = ProcessHandle.current().pid();
    procs.append("process 0 pid=%d used=%d%n".formatted(self, 1L << 30));
    procs.append("sample 0 pid=%d sm=3 mem=1 ts=%d%n".formatted(self, nowMicros));
    used[0] += 1L << 30;
    util[0] += 3;
    StringBuilder out = new StringBuilder();
    for (int g = 0; g < gpus.size(); g++) {
      int u = Math.min(100, util[g]);
      long mj = energy.advance(g, u); // realistic power for the fake's energy counter
      out.append(
          "device %d uuid=%s name=%s total=%d used=%d util=%d memutil=20 energy=%d%n"
              .formatted(g, gpus.get(g), model, total, Math.min(used[g], total), u, mj));
    }
    out.append(procs);
    Path next = file.resolveSibling(file.getFileName() + ".next");
    Files.writeString(next, out);
    Files.move(
        next,
        file,
        java.nio.file.StandardCopyOption.ATOMIC_MOVE,
        java.nio.file.StandardCopyOption.REPLACE_EXISTING);
  }

  /** Stops every child and deletes the node's files. */
  @Override
  public synchronized void close() {
    for (Sim s : sims) {
      for (Child c : s.children()) {
        if (namespaces) {
          // Kill the namespace's init first and let unshare reap it, so nothing is left defunct.
          c.process().descendants().forEach(ProcessHandle::destroyForcibly);
        } else {
          // Without a namespace the process is the sleeper itself: left alone, the wait below
          // would spend its whole second on every one (minutes for a 128-container node).
          c.process().destroyForcibly();
        }
      }
    }
    for (Sim s : sims) {
      for (Child c : s.children()) {
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
    try (Stream<Path> walk = Files.walk(root)) {
      walk.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (IOException e) {
      LOG.atWarn()
          .setMessage("demo cleanup incomplete")
          .addKeyValue("root", root)
          .addKeyValue("error", e.toString())
          .log();
    }
  }
}
