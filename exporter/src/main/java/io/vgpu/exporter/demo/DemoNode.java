package io.vgpu.exporter.demo;

import io.vgpu.exporter.k8s.ContainerMeta;
import io.vgpu.exporter.k8s.NodeMeta;
import io.vgpu.exporter.k8s.PodMeta;
import io.vgpu.exporter.k8s.StaticMetadataSource;
import io.vgpu.kubelet.podresources.v1.AllocatableResourcesResponse;
import io.vgpu.kubelet.podresources.v1.ListPodResourcesResponse;
import io.vgpu.regioncodec.ExtensionDevice;
import io.vgpu.regioncodec.Layout;
import io.vgpu.regioncodec.RegionExtension;
import io.vgpu.regioncodec.RegionFile;
import io.vgpu.regioncodec.RegionSpec;
import io.vgpu.regioncodec.RegionWriter;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
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
 * A simulated GPU node: container directories with v1.2 cache files (libvgpu's, with its extension,
 * and HAMi-core's) whose slots belong to real child processes (blocked on their stdin; as root the
 * processes of one container share their own PID namespace, made with {@code unshare --pid --fork
 * --mount-proc} and entered with {@code nsenter}, so slot pids are namespace pids as in a real
 * pod), usage that moves with the clock on every {@link #tick()}, and fake pod metadata with a HAMi
 * handshake refreshed on every tick. Also one pod that finished and one directory whose pod is gone
 * (stale), so every lifecycle state shows, and (with {@link DemoOptions#problems()}) one pod per
 * {@link DemoProblem}; everything else stays healthy however long the node runs. With {@link
 * DemoOptions#otherSharing()} also the pods that hold a GPU without a region ({@link DemoHolders}:
 * a whole GPU, two MIG devices, two time-slicing replicas) on three GPUs of their own; {@link
 * #podResources()} is the kubelet's answer of who holds which device, for a {@link FakeKubelet}.
 */
public final class DemoNode implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(DemoNode.class);
  private static final long MIB = DemoContainer.MIB;

  /** How HAMi's device plugin writes the handshake time (UTC). */
  private static final java.time.format.DateTimeFormatter HAMI_TIME =
      java.time.format.DateTimeFormatter.ofPattern("yyyy.MM.dd HH:mm:ss")
          .withZone(java.time.ZoneOffset.UTC);

  /** Samples per fake NVML script, below the fake library's 4096. */
  private static final long FAKE_SAMPLE_BUDGET = 3500;

  /** NVML's per-process sampling period on current drivers. */
  private static final long NVML_SAMPLE_PERIOD_MICROS = 200_000;

  /** Most GPUs a demo node can have (the fake NVML's device limit). */
  public static final int MAX_GPUS = 16;

  /** Most running containers a demo node can have. */
  public static final int MAX_CONTAINERS = 256;

  /** The demo's GPU UUIDs: index {@code g} is {@code GPU-5d0d3c6a-<g:04x>-4d3e-9a43-<g:012x>}. */
  public static String gpuUuid(int g) {
    return "GPU-5d0d3c6a-%04x-4d3e-9a43-%012x".formatted(g, g);
  }

  /** The pods {@link DemoOptions#otherSharing()} adds (whole, MIG, time-sliced; no region). */
  public static List<String> otherSharingPods() {
    return DemoHolders.podNames();
  }

  /** The stable pod UID the demo gives the pod named {@code pod}. */
  public static String podUid(String pod) {
    return DemoProblem.podUidOf(pod);
  }

  private final Path root;
  private final boolean namespaces;
  private final List<String> gpus;
  private final Clock clock;
  private final long startMillis;
  private final List<DemoContainer> sims = new ArrayList<>();
  private final StaticMetadataSource metadata;
  private final Random random = new Random(42);
  private long lastSampleMicros;
  private final FakeGpuEnergy energy;
  private DemoHolders holders = DemoHolders.none();

  private DemoNode(Path root, boolean namespaces, int gpus, Clock clock) {
    this.root = root;
    this.namespaces = namespaces;
    this.gpus = java.util.stream.IntStream.range(0, gpus).mapToObj(DemoNode::gpuUuid).toList();
    this.clock = clock;
    this.startMillis = clock.millis();
    this.energy = new FakeGpuEnergy(() -> clock.millis() * 1_000_000L);
    this.metadata = StaticMetadataSource.of(List.of(), nodeMeta());
  }

  /** Creates the default node (2 GPUs, 1 to 3 processes per container) under {@code root}. */
  public static DemoNode create(Path root, int containers) throws IOException {
    return create(root, DemoOptions.of(containers));
  }

  /** Creates a node without deliberate problems under {@code root}; see {@link DemoOptions}. */
  public static DemoNode create(
      Path root,
      int containers,
      int gpus,
      int processesPerContainer,
      int idleContainers,
      boolean pidNamespaces)
      throws IOException {
    return create(
        root,
        new DemoOptions(
            containers,
            gpus,
            processesPerContainer,
            idleContainers,
            pidNamespaces,
            false,
            false,
            Clock.systemUTC()));
  }

  /** Creates the node under {@code root} (created if missing). */
  public static DemoNode create(Path root, DemoOptions o) throws IOException {
    Files.createDirectories(root);
    boolean ns = o.pidNamespaces() && DemoProcesses.canUseNamespaces();
    DemoNode node =
        new DemoNode(root, ns, o.gpus() + (o.otherSharing() ? DemoHolders.GPUS : 0), o.clock());
    LOG.atInfo()
        .setMessage("demo node")
        .addKeyValue("root", root)
        .addKeyValue("containers", o.containers())
        .addKeyValue("gpus", o.gpus())
        .addKeyValue("pid_namespaces", ns)
        .addKeyValue("problems", o.problems())
        .addKeyValue("other_sharing", o.otherSharing())
        .log();
    String[][] names = {
      {"ml", "train-resnet-0", "trainer"},
      {"ml", "train-resnet-0", "sidecar-logger"},
      {"inference", "llm-serve-7f9c", "server"},
      {"inference", "embed-serve-5b2d", "server"},
      {"research", "batch-sweep-3", "worker"},
    };
    int gpus = o.gpus();
    for (int i = 0; i < o.containers(); i++) {
      String[] n = names[i % names.length];
      String pod = i < names.length ? n[1] : n[1] + "-" + i;
      // With 2 GPUs: every third container on both, the others alternating (the default node).
      int first = (2 * (i / 3)) % gpus;
      List<Integer> devs =
          i % 3 == 0 && gpus > 1 ? List.of(first, (first + 1) % gpus) : List.of(i % gpus);
      boolean idle = i >= o.containers() - o.idleContainers();
      node.addContainer(
          new Plan(
              n[0],
              pod,
              n[2],
              devs,
              (2L + i % 4) * 1024 * MIB,
              20 + 10 * (i % 5),
              o.processesPerContainer() == 0 ? 1 + i % 3 : o.processesPerContainer(),
              idle
                  ? DemoContainer.Behavior.IDLE
                  : i == 0 ? DemoContainer.Behavior.BUSY : DemoContainer.Behavior.HEALTHY,
              null));
    }
    if (o.problems()) {
      for (DemoProblem p : DemoProblem.values()) {
        node.addContainer(problemPlan(p, gpus));
      }
    }
    // A finished pod (Succeeded) whose directory is still there: exported as finished, no usage.
    node.addContainer(
        new Plan(
            "ml",
            "preprocess-done",
            "job",
            List.of(0),
            1024 * MIB,
            50,
            0,
            DemoContainer.Behavior.FINISHED,
            null));
    // A directory whose pod no longer exists: exported as stale after the grace period.
    node.addContainer(
        new Plan(
            null,
            "deleted-pod",
            "main",
            List.of(1 % gpus),
            1024 * MIB,
            100,
            0,
            DemoContainer.Behavior.STALE,
            null));
    if (o.otherSharing()) {
      node.holders = DemoHolders.start(gpus, DemoNode::gpuUuid, ns);
      node.holders.putPods(node.metadata);
    }
    node.tick();
    return node;
  }

  /** What one container of the node is to be. */
  private record Plan(
      String namespace,
      String pod,
      String container,
      List<Integer> devices,
      long limitBytes,
      int smLimit,
      int processes,
      DemoContainer.Behavior behavior,
      DemoProblem problem) {}

  private static Plan problemPlan(DemoProblem p, int gpus) {
    DemoContainer.Behavior healthy = DemoContainer.Behavior.HEALTHY;
    return switch (p) {
      // A notebook without an SM limit, so NVML's utilization shows what its region misses.
      case HOSTPID_WRONG ->
          new Plan(p.namespace(), p.pod(), p.container(), List.of(0), 4096 * MIB, 0, 2, healthy, p);
      case ZOMBIE_SLOT ->
          new Plan(
              p.namespace(),
              p.pod(),
              p.container(),
              List.of(1 % gpus),
              6144 * MIB,
              40,
              2,
              healthy,
              p);
      case AT_MEMORY_LIMIT ->
          new Plan(
              p.namespace(), p.pod(), p.container(), List.of(0), 3072 * MIB, 30, 1, healthy, p);
      case STUCK_LOCK ->
          new Plan(
              p.namespace(),
              p.pod(),
              p.container(),
              List.of(1 % gpus),
              2048 * MIB,
              50,
              1,
              healthy,
              p);
    };
  }

  /** HAMi's node annotations as the device plugin keeps them: a handshake of this moment. */
  private NodeMeta nodeMeta() {
    Instant now = clock.instant();
    return new NodeMeta(
        true,
        Optional.of(now),
        Optional.of("Reported_" + HAMI_TIME.format(now)),
        OptionalInt.of(gpus.size()),
        false);
  }

  private void addContainer(Plan plan) throws IOException {
    String uid = podUid(plan.pod());
    Path dir = root.resolve(uid + "_" + plan.container());
    Files.createDirectories(dir);
    Path file = dir.resolve(UUID.randomUUID() + ".cache");
    List<DemoContainer.Child> children = new ArrayList<>();
    for (int p = 0; p < plan.processes(); p++) {
      children.add(
          DemoProcesses.spawn(namespaces, children.isEmpty() ? null : children.getFirst()));
    }
    boolean hamiCore =
        plan.problem() == DemoProblem.HOSTPID_WRONG || plan.problem() == DemoProblem.STUCK_LOCK;
    Optional<DemoContainer.ZombieSlot> zombie = Optional.empty();
    if (plan.problem() == DemoProblem.ZOMBIE_SLOT) {
      // A worker that registered its slot and crashed: a real process of the container, gone.
      DemoContainer.Child dead = DemoProcesses.spawn(namespaces, children.getFirst());
      DemoProcesses.kill(dead);
      zombie =
          Optional.of(
              new DemoContainer.ZombieSlot(
                  children.size(), dead.nsPid(), dead.hostPid(), 768 * MIB));
    }
    int deadHolder = 0;
    if (plan.problem() == DemoProblem.STUCK_LOCK) {
      // HAMi-core's holder records its own (container) pid; this one was killed holding the lock.
      DemoContainer.Child holder = DemoProcesses.spawn(namespaces, children.getFirst());
      DemoProcesses.kill(holder);
      deadHolder = holder.nsPid();
    }
    DemoContainer sim =
        new DemoContainer(
            uid,
            plan.namespace(),
            plan.pod(),
            plan.container(),
            file,
            plan.devices(),
            plan.limitBytes(),
            plan.smLimit(),
            children,
            random.nextDouble() * 6.28,
            plan.behavior(),
            Optional.ofNullable(plan.problem()),
            zombie,
            hamiCore);
    RegionSpec.Builder spec = RegionSpec.builder(Layout.V1_2);
    List<ExtensionDevice> ext = new ArrayList<>();
    for (int d = 0; d < plan.devices().size(); d++) {
      spec.device(gpus.get(plan.devices().get(d)), plan.limitBytes(), plan.smLimit());
      ext.add(ExtensionDevice.zero(d));
    }
    if (!hamiCore) {
      spec.extension(
          new RegionExtension(
              1, 0, 0, clock.millis() * 1_000_000L, "demo", uid, plan.container(), 0, 0, ext));
    }
    spec.priority(1).utilizationSwitch(1).recentKernel(0).ownerPid(deadHolder);
    if (sim.running()) {
      sim.initialSlots(spec, clock.millis(), namespaces);
    }
    RegionWriter.create(file, spec.build());
    if (deadHolder != 0) {
      // sem_wait took the semaphore; the holder died before its sem_post.
      try (RegionFile rf = RegionFile.openReadWrite(file)) {
        rf.writer().setSemaphoreValue(0);
      }
    }
    sims.add(sim);
    if (plan.namespace() != null) {
      putPod(sim, plan);
    }
  }

  private void putPod(DemoContainer sim, Plan plan) {
    String container = plan.container();
    ContainerMeta cm =
        new ContainerMeta(
            container,
            container.startsWith("sidecar")
                ? ContainerMeta.Kind.SIDECAR
                : ContainerMeta.Kind.REGULAR,
            Optional.of(FakeProcfs.containerId(sim.podUid, container)),
            sim.behavior == DemoContainer.Behavior.FINISHED
                ? ContainerMeta.State.TERMINATED
                : ContainerMeta.State.RUNNING);
    PodMeta existing = metadata.pod(sim.podUid).orElse(null);
    Map<String, ContainerMeta> cs =
        new java.util.HashMap<>(existing == null ? Map.of() : existing.containers());
    cs.put(container, cm);
    Map<String, String> labels = new java.util.TreeMap<>();
    labels.put("app", plan.pod().replaceAll("-[0-9a-f]+$", ""));
    if (plan.problem() != null) {
      labels.put(DemoProblem.LABEL, plan.problem().id());
    }
    metadata.put(
        new PodMeta(
            sim.podUid,
            plan.namespace(),
            plan.pod(),
            sim.behavior == DemoContainer.Behavior.FINISHED ? "Succeeded" : "Running",
            Optional.of("burstable"),
            labels,
            cs));
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

  /** The simulated containers, in the order they were made (for tests). */
  List<DemoContainer> containers() {
    return List.copyOf(sims);
  }

  /** Host pids of every live child process (for tests and the resolver). */
  public List<Integer> childHostPids() {
    return Stream.concat(
            sims.stream().flatMap(s -> s.children.stream()).map(DemoContainer.Child::hostPid),
            holders.hostPids().stream())
        .toList();
  }

  /** What the node's kubelet answers to pod-resources List: every running pod's devices. */
  public synchronized ListPodResourcesResponse podResources() {
    return DemoKubelet.list(sims, gpus, holders);
  }

  /** What the node's kubelet answers to GetAllocatableResources. */
  public synchronized AllocatableResourcesResponse allocatable() {
    return DemoKubelet.allocatable(gpus, holders);
  }

  /**
   * Advances the simulation to the clock's now: memory and utilization move, kernels launch,
   * counters grow, the handshake is refreshed (as HAMi's device plugin refreshes it).
   */
  public synchronized void tick() throws IOException {
    long now = clock.millis();
    double t = (lastTickMillis(now) - startMillis) / 1000.0;
    for (DemoContainer s : sims) {
      s.write(t, now, startMillis / 1000, namespaces);
    }
    metadata.setNode(nodeMeta());
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
    for (DemoContainer s : sims) {
      long inode =
          ((Number) Files.getAttribute(s.file, "unix:ino", java.nio.file.LinkOption.NOFOLLOW_LINKS))
              .longValue();
      String cgroup =
          "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
              + s.podUid.replace('-', '_')
              + ".slice/cri-containerd-"
              + FakeProcfs.containerId(s.podUid, s.container)
              + ".scope";
      String maps =
          "7f2000000000-7f2002000000 r-xp 00000000 08:01 777                 /usr/lib/x86_64-linux-gnu/libcuda.so.1\n"
              + "7f1000000000-7f1000100000 r-xp 00000000 08:01 9001                /usr/local/vgpu/libvgpu.so\n"
              + "7f0000000000-7f00001ea000 rw-s 00000000 00:2a "
              + inode
              + "                 /usr/local/vgpu/"
              + s.file.getFileName()
              + "\n";
      for (DemoContainer.Child c : s.children) {
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
    holders.writeProcfs(dir);
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
    long nowMillis = clock.millis();
    long nowMicros = nowMillis * 1000;
    double t = (lastTickMillis(nowMillis) - startMillis) / 1000.0;
    // Samples every 200 ms since the last script (at most 5 s of them), as the driver keeps them:
    // a reader then sees the whole time covered, whatever its polling interval.
    // At most FAKE_SAMPLE_BUDGET samples in all (the fake keeps 4096): a node of many processes
    // gets fewer, further apart, each still covering its share of the interval.
    long pairs = 1L + holders.hostPids().size();
    for (DemoContainer s : sims) {
      if (s.running() && s.behavior != DemoContainer.Behavior.IDLE) {
        pairs += (long) s.children.size() * s.devices.size();
      }
    }
    List<Long> stamps = new ArrayList<>();
    long from = Math.max(lastSampleMicros, nowMicros - 5_000_000L);
    long most = Math.max(1, FAKE_SAMPLE_BUDGET / pairs);
    // On the GPU's tick grid (multiples of its period), where the fake's device ticks lie too.
    long period =
        NVML_SAMPLE_PERIOD_MICROS
            * Math.ceilDiv(Math.max(1, nowMicros - from), most * NVML_SAMPLE_PERIOD_MICROS);
    long newest = lastTickMillis(nowMillis) * 1000;
    for (long ts = newest; ts > from && stamps.size() < most; ts -= period) {
      stamps.addFirst(ts);
    }
    lastSampleMicros = nowMicros;
    long[] used = new long[gpus.size()];
    int[] util = new int[gpus.size()];
    StringBuilder procs = new StringBuilder();
    for (DemoContainer s : sims) {
      s.appendNvml(procs, used, util, t, stamps, startMillis);
    }
    holders.appendNvml(procs, used, util, model, t, stamps, startMillis);
    long self = ProcessHandle.current().pid();
    procs.append("process 0 pid=%d used=%d%n".formatted(self, 1L << 30));
    for (long ts : stamps) {
      procs.append("sample 0 pid=%d sm=3 mem=1 ts=%d%n".formatted(self, ts));
    }
    used[0] += 1L << 30;
    util[0] += 3;
    StringBuilder out = new StringBuilder();
    for (int g = 0; g < gpus.size(); g++) {
      int u = Math.min(100, util[g]);
      long mj = energy.advance(g, u); // realistic power for the fake's energy counter
      out.append(
          "device %d uuid=%s name=%s total=%d used=%d util=%d memutil=20 energy=%d period=%d%n"
              .formatted(
                  g,
                  gpus.get(g),
                  model,
                  total,
                  Math.min(used[g], total),
                  u,
                  mj,
                  NVML_SAMPLE_PERIOD_MICROS));
      out.append(FakeGpuEnergy.healthLine(g, u));
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

  /**
   * The GPU's latest sampling tick at or before {@code millis} (ticks lie on multiples of its
   * period): the time the regions' utilization and NVML's newest samples are taken at, so a
   * region's sm_util is NVML's newest sample, as HAMi-core copies it.
   */
  private static long lastTickMillis(long millis) {
    long periodMillis = NVML_SAMPLE_PERIOD_MICROS / 1000;
    return Math.floorDiv(millis, periodMillis) * periodMillis;
  }

  /** Stops every child and deletes the node's files. */
  @Override
  public synchronized void close() {
    List<DemoContainer.Child> children = new ArrayList<>(holders.children());
    sims.forEach(s -> children.addAll(s.children));
    DemoProcesses.stopAll(children);
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
