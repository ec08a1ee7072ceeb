package io.vgpu.exporter.demo;

import io.vgpu.kubelet.podresources.v1.AllocatableResourcesResponse;
import io.vgpu.kubelet.podresources.v1.ContainerDevices;
import io.vgpu.kubelet.podresources.v1.ContainerResources;
import io.vgpu.kubelet.podresources.v1.ListPodResourcesResponse;
import io.vgpu.kubelet.podresources.v1.PodResources;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The demo node's kubelet answers (pod-resources v1), as a node running HAMi's device plugin for
 * its vGPU GPUs and NVIDIA's for the others would give them: each running vGPU container holds HAMi
 * slot ids ({@code <GPU uuid>-<n>}, one per GPU it uses, {@code nvidia.com/gpu}); the holder pods
 * hold what {@link DemoHolders} gives them. Finished and deleted pods are not listed (the kubelet
 * lists the pods it runs).
 */
final class DemoKubelet {
  /** HAMi's slots per GPU (its device plugin's split count). */
  private static final int SLOTS_PER_GPU = 10;

  private DemoKubelet() {}

  static ListPodResourcesResponse list(
      List<DemoContainer> sims, List<String> gpus, DemoHolders holders) {
    Map<String, PodResources.Builder> pods = new LinkedHashMap<>();
    int[] nextSlot = new int[gpus.size()];
    for (DemoContainer s : sims) {
      if (s.namespace == null || !s.running()) {
        continue;
      }
      ContainerDevices.Builder devices =
          ContainerDevices.newBuilder().setResourceName("nvidia.com/gpu");
      for (int g : s.devices) {
        devices.addDeviceIds(gpus.get(g) + "-" + (nextSlot[g]++ % SLOTS_PER_GPU));
      }
      pods.computeIfAbsent(
              s.namespace + "/" + s.pod,
              k -> PodResources.newBuilder().setNamespace(s.namespace).setName(s.pod))
          .addContainers(ContainerResources.newBuilder().setName(s.container).addDevices(devices));
    }
    ListPodResourcesResponse.Builder out = ListPodResourcesResponse.newBuilder();
    pods.values().forEach(out::addPodResources);
    out.addAllPodResources(holders.podResources());
    return out.build();
  }

  static AllocatableResourcesResponse allocatable(List<String> gpus, DemoHolders holders) {
    ContainerDevices.Builder hami = ContainerDevices.newBuilder().setResourceName("nvidia.com/gpu");
    int vgpuGpus = gpus.size() - (holders.isEmpty() ? 0 : DemoHolders.GPUS);
    for (int g = 0; g < vgpuGpus; g++) {
      for (int n = 0; n < SLOTS_PER_GPU; n++) {
        hami.addDeviceIds(gpus.get(g) + "-" + n);
      }
    }
    AllocatableResourcesResponse.Builder out =
        AllocatableResourcesResponse.newBuilder().addDevices(hami);
    if (!holders.isEmpty()) {
      out.addAllDevices(holders.allocatable(gpus::get, vgpuGpus));
    }
    return out.build();
  }
}
