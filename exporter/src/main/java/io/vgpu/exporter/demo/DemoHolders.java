package io.vgpu.exporter.demo;

import io.vgpu.exporter.k8s.ContainerMeta;
import io.vgpu.exporter.k8s.PodMeta;
import io.vgpu.exporter.k8s.StaticMetadataSource;
import io.vgpu.kubelet.podresources.v1.ContainerDevices;
import io.vgpu.kubelet.podresources.v1.PodResources;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.IntFunction;

/**
 * The demo node's pods that hold a GPU without a shared region, beside its vGPU pods, on GPUs of
 * their own as a real node's device plugins hand them out:
 *
 * <ul>
 *   <li>a whole-GPU pod ({@code nvidia.com/gpu}, the GPU's UUID);
 *   <li>a MIG-partitioned GPU with two MIG pods ({@code nvidia.com/mig-3g.40gb} and {@code
 *       nvidia.com/mig-2g.20gb}, MIG device UUIDs);
 *   <li>a time-sliced GPU with two pods on its replicas ({@code nvidia.com/gpu.shared}, NVIDIA's
 *       {@code <uuid>::0} and {@code ::1}).
 * </ul>
 *
 * Each runs one real process (a sleeper, in a PID namespace of its own as root, as the vGPU pods'
 * processes), with no libvgpu and no region: the exporter finds it as a real node's exporter does,
 * through NVML's process list (the fake NVML script), its kubepods cgroup (the demo's procfs) and
 * the kubelet's pod-resources answer (the demo's {@link FakeKubelet}). Memory is steady; SM
 * utilization moves with the clock like the vGPU pods'. MIG devices get no utilization samples
 * (NVML has none per process on MIG) and their processes are listed on their MIG device only.
 */
final class DemoHolders {
  /** GPUs the holders take, after the vGPU pods' ones: whole, MIG-partitioned, time-sliced. */
  static final int GPUS = 3;

  private static final long GIB = 1L << 30;

  /** The demo's MIG device UUIDs: device {@code j} of GPU {@code g}. */
  static String migUuid(int g, int j) {
    return "MIG-7a1c3b2e-%04x-4f00-8c00-%012x".formatted(g, j);
  }

  /** What one holder pod is to be. */
  private record Plan(
      String namespace,
      String pod,
      String container,
      String resource,
      int gpuOffset,
      int mig,
      String migProfile,
      long bytes,
      int sm,
      int swing) {}

  private static final List<Plan> PLANS =
      List.of(
          new Plan(
              "ml", "finetune-llama-0", "trainer", "nvidia.com/gpu", 0, -1, "", 30 * GIB, 70, 15),
          new Plan(
              "inference",
              "mig-serve-a",
              "server",
              "nvidia.com/mig-3g.40gb",
              1,
              0,
              "3g.40gb",
              12 * GIB,
              0,
              0),
          new Plan(
              "inference",
              "mig-serve-b",
              "server",
              "nvidia.com/mig-2g.20gb",
              1,
              1,
              "2g.20gb",
              6 * GIB,
              0,
              0),
          new Plan(
              "research",
              "notebook-ts-a",
              "notebook",
              "nvidia.com/gpu.shared",
              2,
              0,
              "",
              8 * GIB,
              35,
              10),
          new Plan(
              "research",
              "notebook-ts-b",
              "notebook",
              "nvidia.com/gpu.shared",
              2,
              1,
              "",
              4 * GIB,
              20,
              8));

  /** One holder pod and its process. */
  private record Holder(
      Plan plan, String uid, int gpu, String deviceId, DemoContainer.Child child) {}

  private final List<Holder> holders;

  private DemoHolders(List<Holder> holders) {
    this.holders = List.copyOf(holders);
  }

  /** The names of the holder pods, whole-GPU first, then MIG, then time-sliced. */
  static List<String> podNames() {
    return PLANS.stream().map(Plan::pod).toList();
  }

  /** No holder pods (a node of vGPU pods only). */
  static DemoHolders none() {
    return new DemoHolders(List.of());
  }

  boolean isEmpty() {
    return holders.isEmpty();
  }

  /**
   * Starts the holders' processes on GPUs {@code firstGpu} to {@code firstGpu + GPUS - 1}.
   *
   * @param gpuUuid the node's GPU UUIDs by index
   */
  static DemoHolders start(int firstGpu, IntFunction<String> gpuUuid, boolean namespaces)
      throws IOException {
    List<Holder> out = new ArrayList<>();
    for (Plan p : PLANS) {
      int gpu = firstGpu + p.gpuOffset();
      String id =
          p.gpuOffset() == 1
              ? migUuid(gpu, p.mig())
              : p.gpuOffset() == 2 ? gpuUuid.apply(gpu) + "::" + p.mig() : gpuUuid.apply(gpu);
      out.add(
          new Holder(
              p, DemoProblem.podUidOf(p.pod()), gpu, id, DemoProcesses.spawn(namespaces, null)));
    }
    return new DemoHolders(out);
  }

  /** Puts the holders' pods into the node's metadata: running, their container ids set. */
  void putPods(StaticMetadataSource metadata) {
    for (Holder h : holders) {
      Plan p = h.plan();
      ContainerMeta c =
          new ContainerMeta(
              p.container(),
              ContainerMeta.Kind.REGULAR,
              Optional.of(FakeProcfs.containerId(h.uid(), p.container())),
              ContainerMeta.State.RUNNING);
      metadata.put(
          new PodMeta(
              h.uid(),
              p.namespace(),
              p.pod(),
              "Running",
              Optional.of("guaranteed"),
              Map.of("app", p.pod().replaceAll("-[0-9a-z]+$", "")),
              Map.of(p.container(), c)));
    }
  }

  /** The holders' pods as the kubelet lists them. */
  List<PodResources> podResources() {
    List<PodResources> out = new ArrayList<>();
    for (Holder h : holders) {
      out.add(
          FakeKubelet.pod(
              h.plan().namespace(),
              h.plan().pod(),
              h.plan().container(),
              h.plan().resource(),
              h.deviceId()));
    }
    return out;
  }

  /** The devices the holders' device plugins offer, by resource name. */
  List<ContainerDevices> allocatable(IntFunction<String> gpuUuid, int firstGpu) {
    List<ContainerDevices> out = new ArrayList<>();
    out.add(device("nvidia.com/gpu", gpuUuid.apply(firstGpu)));
    out.add(device("nvidia.com/mig-3g.40gb", migUuid(firstGpu + 1, 0)));
    out.add(device("nvidia.com/mig-2g.20gb", migUuid(firstGpu + 1, 1)));
    String shared = gpuUuid.apply(firstGpu + 2);
    out.add(
        device(
            "nvidia.com/gpu.shared",
            shared + "::0",
            shared + "::1",
            shared + "::2",
            shared + "::3"));
    return out;
  }

  private static ContainerDevices device(String resource, String... ids) {
    return ContainerDevices.newBuilder()
        .setResourceName(resource)
        .addAllDeviceIds(List.of(ids))
        .build();
  }

  /** Host pids of the holders' processes. */
  List<Integer> hostPids() {
    return holders.stream().map(h -> h.child().hostPid()).toList();
  }

  /** The holders' processes, for stopping them. */
  List<DemoContainer.Child> children() {
    return holders.stream().map(Holder::child).toList();
  }

  /**
   * Writes each holder's process into the demo's procfs: its pod's kubepods cgroup, libcuda mapped
   * and nothing of libvgpu (no preload, no region).
   */
  void writeProcfs(Path dir) throws IOException {
    for (Holder h : holders) {
      String cgroup =
          "0::/kubepods.slice/kubepods-pod"
              + h.uid().replace('-', '_')
              + ".slice/cri-containerd-"
              + FakeProcfs.containerId(h.uid(), h.plan().container())
              + ".scope";
      FakeProcfs.write(
          dir,
          new FakeProcfs.Entry(
              h.child().hostPid(),
              h.child().nsPid(),
              "python3",
              cgroup,
              "7f2000000000-7f2002000000 r-xp 00000000 08:01 777                 /usr/lib/x86_64-linux-gnu/libcuda.so.1\n",
              "PATH=/usr/bin\0NVIDIA_VISIBLE_DEVICES=" + h.deviceId() + "\0",
              null));
    }
  }

  /**
   * Appends the holders to the fake NVML script: the MIG devices of the partitioned GPU, every
   * process on its GPU or MIG device with its memory, and (but on MIG) samples of what it runs at
   * each of {@code stamps}. {@code used} and {@code util} get the holders' share per GPU.
   *
   * @param model the GPU name the node's script uses
   * @param stamps sample times (epoch microseconds), oldest first
   * @param startMillis when the node started (epoch milliseconds)
   */
  void appendNvml(
      StringBuilder out,
      long[] used,
      int[] util,
      String model,
      double t,
      List<Long> stamps,
      long startMillis) {
    for (Holder h : holders) {
      Plan p = h.plan();
      int pid = h.child().hostPid();
      used[h.gpu()] += p.bytes();
      if (p.gpuOffset() == 1) {
        long total = (p.migProfile().startsWith("3g") ? 40 : 20) * GIB;
        out.append(
            "mig %d %d uuid=%s name=%s_MIG_%s total=%d used=%d%n"
                .formatted(
                    h.gpu(), p.mig(), h.deviceId(), model, p.migProfile(), total, p.bytes()));
        out.append("migprocess %d %d pid=%d used=%d%n".formatted(h.gpu(), p.mig(), pid, p.bytes()));
        continue;
      }
      out.append("process %d pid=%d used=%d%n".formatted(h.gpu(), pid, p.bytes()));
      util[h.gpu()] += sm(p, t);
      for (long ts : stamps) {
        out.append(
            "sample %d pid=%d sm=%d mem=10 ts=%d%n"
                .formatted(h.gpu(), pid, sm(p, (ts / 1000 - startMillis) / 1000.0), ts));
      }
    }
  }

  /** SM percent a holder's process runs at {@code t} seconds. */
  private static int sm(Plan p, double t) {
    return (int) Math.round(p.sm() + p.swing() * Math.sin(p.pod().length() + t / 17));
  }
}
