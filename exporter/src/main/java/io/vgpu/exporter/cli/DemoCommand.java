package io.vgpu.exporter.cli;

import io.vgpu.exporter.ExporterApp;
import io.vgpu.exporter.config.ExporterConfig;
import io.vgpu.exporter.config.Flags;
import io.vgpu.exporter.demo.DemoNode;
import io.vgpu.exporter.demo.DemoOptions;
import io.vgpu.exporter.demo.FakeKubelet;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.Callable;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/** {@code demo}: the exporter on a simulated node (no GPU, no cluster). */
@Command(
    name = "demo",
    description =
        "Run the exporter on a simulated node: generated cache files written for real child processes, fake pods.",
    mixinStandardHelpOptions = true)
final class DemoCommand implements Callable<Integer>, FlagOptions.Host {
  @CommandLine.Spec CommandLine.Model.CommandSpec spec;

  @Option(
      names = "--port",
      description = "Port to serve on (default ${DEFAULT-VALUE}).",
      defaultValue = "9394")
  int port;

  @Option(
      names = "--bind",
      description = "Address to bind (default ${DEFAULT-VALUE}).",
      defaultValue = "127.0.0.1")
  String bind;

  @Option(
      names = "--containers",
      description =
          "Healthy running containers to simulate, 1-"
              + io.vgpu.exporter.demo.DemoNode.MAX_CONTAINERS
              + " (default ${DEFAULT-VALUE}), besides the problem pods, a finished pod and a"
              + " deleted pod's directory.",
      defaultValue = "5")
  int containers;

  @Option(
      names = "--problems",
      description =
          "Add one pod per deliberate problem (wrong host pid, zombie slot, memory at the limit,"
              + " stuck lock), labelled "
              + io.vgpu.exporter.demo.DemoProblem.LABEL
              + " (default ${DEFAULT-VALUE}).",
      defaultValue = "true",
      arity = "1")
  boolean problems;

  @Option(
      names = "--other-sharing",
      description =
          "Add the pods that hold a GPU without a vGPU region, on three more GPUs: a whole-GPU"
              + " pod, a MIG-partitioned GPU with two MIG pods and a time-sliced GPU with two pods;"
              + " a fake kubelet pod-resources socket says who holds which device (default"
              + " ${DEFAULT-VALUE}).",
      defaultValue = "true",
      arity = "1")
  boolean otherSharing;

  @Option(
      names = "--gpus",
      description =
          "GPUs of the simulated node, 1-"
              + io.vgpu.exporter.demo.DemoNode.MAX_GPUS
              + " (default ${DEFAULT-VALUE}; --other-sharing adds 3). Every third container uses"
              + " two GPUs, the others one.",
      defaultValue = "2")
  int gpus;

  @Option(
      names = "--processes-per-container",
      description =
          "Live processes of each running container, 1-3; 0 (the default) varies them from 1 to 3"
              + " by container.",
      defaultValue = "0")
  int processesPerContainer;

  @Option(
      names = "--idle-containers",
      description =
          "How many running containers (the last ones) hold GPU memory without launching kernels"
              + " (default ${DEFAULT-VALUE}).",
      defaultValue = "0")
  int idleContainers;

  @Option(
      names = "--fake-nvml",
      description =
          "Serve with the repository's fake libnvidia-ml (built by make demo) scripted to match"
              + " the simulation, so per-container SM utilization, attribution and the host GPU"
              + " families have data: auto (default: when the library is found), off, or the"
              + " library's path. An explicit --nvml flag wins.",
      defaultValue = "auto")
  String fakeNvml;

  @Option(
      names = "--fake-nvml-config",
      description =
          "Keep this file a script for the repository's fake libnvidia-ml matching the simulation"
              + " (GPUs, the containers' processes and their samples, one process of no"
              + " container); run with FAKE_NVML_CONFIG=<the same file> --nvml"
              + " --nvml.library=libvgpu/build/fake/libnvidia-ml.so.1. Default: none.")
  Path fakeNvmlConfig;

  @Option(
      names = "--pid-namespaces",
      description =
          "Run each simulated process in its own PID namespace when root, as in a real pod"
              + " (default ${DEFAULT-VALUE}); false starts many demo nodes on one machine faster.",
      defaultValue = "true",
      arity = "1")
  boolean pidNamespaces;

  @Option(
      names = "--tick-interval",
      description =
          "How often the simulated usage moves and kernels launch (default ${DEFAULT-VALUE}); a"
              + " fleet of demo nodes on one machine uses a longer one.",
      defaultValue = "1s")
  String tickInterval;

  @Option(
      names = "--gpu-model",
      description =
          "GPU name in the fake NVML script, no blanks (default ${DEFAULT-VALUE}); a <n>GB in it"
              + " sets the memory total.",
      defaultValue = "NVIDIA_H100_80GB_HBM3")
  String gpuModel;

  @Option(
      names = "--duration",
      description = "Stop after this long (e.g. 30s; default: until Ctrl-C).",
      defaultValue = "0")
  String duration;

  @Override
  public boolean includeListenFlags() {
    return false;
  }

  @Override
  public Integer call() throws Exception {
    Map<String, String> values =
        new HashMap<>(FlagOptions.values(spec.commandLine().getParseResult()));
    // What the user chose, before the demo's own defaults are filled in below.
    boolean nvmlChosen = values.containsKey(Flags.NVML.name());
    boolean procfsChosen = values.containsKey(Flags.PROCFS.name());
    Path tmp = Files.createTempDirectory("vgpu-demo-");
    Path root = tmp.resolve("containers");
    values.putIfAbsent(Flags.CACHE_ROOT.name(), root.toString());
    values.put(Flags.WEB_LISTEN_PORT.name(), Integer.toString(port));
    values.put(Flags.WEB_LISTEN_ADDRESS.name(), bind);
    values.putIfAbsent(Flags.KUBERNETES.name(), "false");
    values.putIfAbsent(Flags.NODE_NAME.name(), "demo-node");
    values.putIfAbsent(Flags.RESCAN_INTERVAL.name(), "2s");
    values.putIfAbsent(Flags.STALE_GRACE_PERIOD.name(), "0s");
    values.putIfAbsent(Flags.NVML.name(), "false");
    ExporterConfig config = ExporterConfig.resolve(values, Map.of());
    Duration stopAfter = io.vgpu.exporter.config.Parsers.duration(duration);
    long tickMillis = io.vgpu.exporter.config.Parsers.duration(tickInterval).toMillis();
    if (tickMillis < 100) {
      throw new io.vgpu.exporter.config.ConfigException(
          "--tick-interval must be at least 100ms, was " + tickInterval);
    }
    LogSetup.configure(config.get(Flags.LOG_LEVEL), config.get(Flags.LOG_FORMAT));
    DemoNode node =
        DemoNode.create(
            config.cacheRoot(),
            new DemoOptions(
                containers,
                gpus,
                processesPerContainer,
                idleContainers,
                pidNamespaces,
                problems,
                otherSharing,
                java.time.Clock.systemUTC()));
    // The demo's processes only: a procfs that shows its children as pod processes and nothing
    // else of this machine (no real process, no real pod on it is ever judged or attributed).
    Path procfs = tmp.resolve("proc");
    if (!procfsChosen) {
      node.writeProcfs(procfs);
      config = config.with(Flags.PROCFS, procfs);
    }
    Optional<Path> fakeLibrary = nvmlChosen ? Optional.empty() : fakeNvmlLibrary(fakeNvml);
    if (fakeLibrary.isPresent()) {
      if (fakeNvmlConfig == null) {
        fakeNvmlConfig = tmp.resolve("fake-nvml.conf");
      }
      // The fake reads FAKE_NVML_CONFIG with getenv on every call: set it in this process.
      LibC.INSTANCE.setenv("FAKE_NVML_CONFIG", fakeNvmlConfig.toString(), 1);
      config =
          config
              .with(Flags.NVML, true)
              .with(Flags.NVML_LIBRARY, fakeLibrary.get().toString())
              .with(Flags.NVML_SAMPLE_INTERVAL, Duration.ofSeconds(1));
    } else if (!nvmlChosen && !"off".equals(fakeNvml)) {
      org.slf4j.LoggerFactory.getLogger(DemoCommand.class)
          .atWarn()
          .setMessage(
              "fake NVML not found: the demo runs without NVML (no NVML SM utilization,"
                  + " attribution or host GPU families); build it with make -C libvgpu fakes")
          .addKeyValue("looked_for", FAKE_LIBRARY)
          .log();
    }
    if (fakeNvmlConfig != null) {
      node.writeFakeNvmlScript(fakeNvmlConfig, gpuModel);
    }
    // The node's kubelet: a real gRPC server on a unix socket answering who holds which device.
    Path socket = tmp.resolve("kubelet").resolve("pod-resources.sock");
    Files.createDirectories(socket.getParent());
    FakeKubelet kubelet =
        new FakeKubelet(socket).setList(node.podResources()).setAllocatable(node.allocatable());
    // Same wiring as serve: attribution (and NVML, when --nvml is on) runs in the demo too.
    ExporterApp app =
        ExporterApp.builder(config).metadata(node.metadata()).podResourcesSocket(socket).build();
    ScheduledExecutorService ticker =
        Executors.newSingleThreadScheduledExecutor(
            r -> Thread.ofPlatform().daemon().name("vgpu-demo").unstarted(r));
    Runnable shutdown =
        () -> {
          ticker.shutdownNow();
          app.close();
          kubelet.close();
          node.close();
          // The demo's own temp tree: its procfs, the fake NVML script, the default cache root.
          deleteTree(tmp);
        };
    Thread hook = new Thread(shutdown, "vgpu-demo-shutdown");
    Runtime.getRuntime().addShutdownHook(hook);
    try {
      app.start();
    } catch (RuntimeException e) {
      Runtime.getRuntime().removeShutdownHook(hook);
      shutdown.run();
      throw new io.vgpu.exporter.config.ConfigException(
          "cannot serve on " + bind + ":" + port + ": " + rootMessage(e));
    }
    var _ =
        ticker.scheduleAtFixedRate(
            () -> {
              try {
                node.tick();
                if (fakeNvmlConfig != null) {
                  node.writeFakeNvmlScript(fakeNvmlConfig, gpuModel);
                }
              } catch (java.io.IOException | RuntimeException e) {
                org.slf4j.LoggerFactory.getLogger(DemoCommand.class)
                    .atWarn()
                    .setMessage("demo tick failed")
                    .addKeyValue("error", e.toString())
                    .log();
              }
            },
            tickMillis,
            tickMillis,
            TimeUnit.MILLISECONDS);
    spec.commandLine()
        .getOut()
        .print(
            DemoBanner.text(
                bind,
                app.port(),
                config.cacheRoot(),
                config.get(Flags.PROCFS),
                problems,
                fakeLibrary,
                Optional.ofNullable(fakeNvmlConfig)));
    spec.commandLine().getOut().flush();
    if (stopAfter.isZero()) {
      new java.util.concurrent.CountDownLatch(1).await();
    } else {
      Thread.sleep(stopAfter.toMillis());
      Runtime.getRuntime().removeShutdownHook(hook);
      shutdown.run();
    }
    return 0;
  }

  /** The fake library as make builds it, relative to the repository root. */
  static final Path FAKE_LIBRARY = Path.of("libvgpu", "build", "fake", "libnvidia-ml.so.1");

  private interface LibC extends com.sun.jna.Library {
    LibC INSTANCE = com.sun.jna.Native.load("c", LibC.class);

    int setenv(String name, String value, int overwrite);
  }

  /**
   * The fake libnvidia-ml to serve the demo with: {@code auto} looks in the working directory and
   * the directories above it (make demo runs at the repository root), {@code off} none, anything
   * else is the library's path.
   */
  static Optional<Path> fakeNvmlLibrary(String choice) {
    if ("off".equals(choice)) {
      return Optional.empty();
    }
    if (!"auto".equals(choice)) {
      Path p = Path.of(choice);
      if (!Files.isRegularFile(p)) {
        throw new io.vgpu.exporter.config.ConfigException("--fake-nvml: no library at " + p);
      }
      return Optional.of(p.toAbsolutePath());
    }
    for (Path dir = Path.of("").toAbsolutePath(); dir != null; dir = dir.getParent()) {
      Path p = dir.resolve(FAKE_LIBRARY);
      if (Files.isRegularFile(p)) {
        return Optional.of(p);
      }
    }
    return Optional.empty();
  }

  private static void deleteTree(Path dir) {
    try (java.util.stream.Stream<Path> walk = Files.walk(dir)) {
      walk.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (java.io.IOException e) {
      // nothing written there, or already gone
    }
  }

  static String rootMessage(Throwable t) {
    Throwable r = t;
    while (r.getCause() != null) {
      r = r.getCause();
    }
    return r.getMessage() == null ? r.toString() : r.getMessage();
  }
}
