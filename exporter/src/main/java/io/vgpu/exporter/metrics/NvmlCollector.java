package io.vgpu.exporter.metrics;

import static io.vgpu.exporter.metrics.MetricNames.*;

import io.prometheus.metrics.model.snapshots.Labels;
import io.vgpu.exporter.node.NodeState;
import io.vgpu.exporter.nvml.GpuSnapshot;
import io.vgpu.exporter.nvml.NvmlSampler;
import io.vgpu.exporter.nvml.NvmlSnapshot;
import java.util.ArrayList;
import java.util.List;

/**
 * NVML's own families from the sampler's latest snapshot: per-GPU memory and utilization, NVML
 * health, and (with --hami-compat) HAMi's {@code hami_host_gpu_*}. Example:
 *
 * <pre>
 * vgpu_gpu_utilization_ratio{device_index="0",device_uuid="GPU-0a",model="NVIDIA H100 80GB HBM3",node="n1"} 0.72
 * vgpu_exporter_nvml_up{node="n1"} 1.0
 * vgpu_exporter_nvml_errors_total{node="n1",return_code="15"} 3.0
 * hami_host_gpu_utilization_ratio{device_index="0",device_type="NVIDIA-NVIDIA H100 80GB HBM3",device_uuid="GPU-0a",node="n1",zone="vGPU"} 72.0
 * </pre>
 */
public final class NvmlCollector extends VgpuCollector {
  private static final String[] G = {L_NODE, L_DEVICE_INDEX, L_DEVICE_UUID, L_MODEL};
  private static final String[] H = {
    L_NODE, L_DEVICE_INDEX, L_DEVICE_UUID, L_HAMI_DEVICE_TYPE, HAMI_ZONE_LABEL
  };

  private final NvmlSampler sampler;
  private final boolean hamiCompat;
  private static final FamilySpec.Gauge GPU_MEMORY_USED =
      FamilySpec.gauge(MetricNames.GPU_MEMORY_USED, "GPU memory in use (NVML)", G);
  private static final FamilySpec.Gauge GPU_MEMORY_TOTAL =
      FamilySpec.gauge(MetricNames.GPU_MEMORY_TOTAL, "GPU memory size (NVML)", G);
  private static final FamilySpec.Gauge GPU_UTILIZATION =
      FamilySpec.gauge(
          MetricNames.GPU_UTILIZATION,
          "Share of time a kernel ran on the GPU (NVML, averaged over the sampler window)",
          G);
  private static final FamilySpec.Gauge EXPORTER_NVML_UP =
      FamilySpec.gauge(
          MetricNames.EXPORTER_NVML_UP, "1 while NVML is initialised and answering", L_NODE);
  private static final FamilySpec.Counter EXPORTER_NVML_ERRORS =
      FamilySpec.counter(
          MetricNames.EXPORTER_NVML_ERRORS,
          "Failed NVML calls by nvmlReturn_t code",
          L_NODE,
          "return_code");
  private static final FamilySpec.Gauge HAMI_HOST_GPU_MEMORY_USED =
      FamilySpec.gauge(
          MetricNames.HAMI_HOST_GPU_MEMORY_USED, "GPU device memory usage in bytes", H);
  private static final FamilySpec.Gauge HAMI_HOST_GPU_UTILIZATION =
      FamilySpec.gauge(
          MetricNames.HAMI_HOST_GPU_UTILIZATION, "GPU core utilization ratio (0-100)", H);
  private static final FamilySpec.Gauge HAMI_HOST_GPU_MEMORY_CONTROLLER_UTILIZATION =
      FamilySpec.gauge(
          MetricNames.HAMI_HOST_GPU_MEMORY_CONTROLLER_UTILIZATION,
          "GPU memory controller utilization ratio (0-100)",
          H);

  public NvmlCollector(NvmlSampler sampler, boolean hamiCompat) {
    super(families(hamiCompat));
    this.sampler = sampler;
    this.hamiCompat = hamiCompat;
  }

  /** NVML's own families, and HAMi's host families with --hami-compat. */
  private static List<FamilySpec> families(boolean hamiCompat) {
    List<FamilySpec> d = new ArrayList<>();
    d.addAll(List.of(GPU_MEMORY_USED, GPU_MEMORY_TOTAL, GPU_UTILIZATION));
    d.addAll(List.of(EXPORTER_NVML_UP, EXPORTER_NVML_ERRORS));
    if (hamiCompat) {
      d.add(HAMI_HOST_GPU_MEMORY_USED);
      d.add(HAMI_HOST_GPU_UTILIZATION);
      d.add(HAMI_HOST_GPU_MEMORY_CONTROLLER_UTILIZATION);
    }
    return d;
  }

  public NvmlSampler sampler() {
    return sampler;
  }

  /** {node, device_index, device_uuid, model} of a GPU; MIG devices carry their parent's index. */
  static Labels gpuLabels(LabelSets labels, String node, GpuSnapshot g) {
    return labels.of(
        G,
        new String[] {
          node, LabelSets.index(g.identity().index()), g.identity().uuid(), g.identity().name()
        });
  }

  @Override
  protected void collect(NodeState state, Sink out) {
    NvmlSnapshot snap = sampler.latest();
    String node = state.node();
    var used = families.gauge(GPU_MEMORY_USED);
    var total = families.gauge(GPU_MEMORY_TOTAL);
    var util = families.gauge(GPU_UTILIZATION);
    var up = families.gauge(EXPORTER_NVML_UP);
    var errors = families.counter(EXPORTER_NVML_ERRORS);
    for (GpuSnapshot g : snap.gpus()) {
      Labels l = gpuLabels(labels, node, g);
      g.memory()
          .ifPresent(
              m -> {
                used.add((double) m.usedBytes(), l);
                total.add((double) m.totalBytes(), l);
              });
      g.utilizationRatio().ifPresent(v -> util.add(v, l));
    }
    up.add(snap.status().up() ? 1 : 0, labels.node(node));
    sampler
        .errorCounts()
        .forEach((code, n) -> errors.add(n, labels.nodeWith(node, "return_code", code.label())));
    out.add(used.build());
    out.add(total.build());
    out.add(util.build());
    out.add(up.build());
    out.add(errors.build());
    if (hamiCompat) {
      var hUsed = families.gauge(HAMI_HOST_GPU_MEMORY_USED);
      var hUtil = families.gauge(HAMI_HOST_GPU_UTILIZATION);
      var hMem = families.gauge(HAMI_HOST_GPU_MEMORY_CONTROLLER_UTILIZATION);
      for (GpuSnapshot g : snap.gpus()) {
        if (g.identity().migIndex() >= 0) {
          continue; // HAMi's host families are per physical GPU
        }
        Labels l =
            labels.of(
                H,
                new String[] {
                  node,
                  LabelSets.index(g.identity().index()),
                  g.identity().uuid(),
                  "NVIDIA-" + g.identity().name(),
                  HAMI_ZONE
                });
        g.memory().ifPresent(m -> hUsed.add((double) m.usedBytes(), l));
        g.utilizationRatio().ifPresent(v -> hUtil.add(v * 100, l));
        g.memoryUtilizationRatio().ifPresent(v -> hMem.add(v * 100, l));
      }
      out.add(hUsed.build());
      out.add(hUtil.build());
      out.add(hMem.build());
    }
  }
}
