package io.vgpu.exporter.metrics;

import static io.vgpu.exporter.metrics.MetricNames.*;

import io.prometheus.metrics.model.snapshots.Labels;
import io.vgpu.exporter.node.NodeState;
import io.vgpu.exporter.nvml.ClockEventReason;
import io.vgpu.exporter.nvml.DeviceHealth;
import io.vgpu.exporter.nvml.EccCounts;
import io.vgpu.exporter.nvml.GpuSnapshot;
import io.vgpu.exporter.nvml.NvmlSampler;
import java.util.List;

/**
 * Device health of every physical GPU from the sampler's latest snapshot: power, temperature, clock
 * event reasons, XID errors, ECC counts and the row remapper (docs/device-health.md maps each to
 * its DCGM field). A reading NVML cannot give is absent and {@code
 * vgpu_gpu_health_unavailable{field,reason}} says why. Example:
 *
 * <pre>
 * vgpu_gpu_power_watts{device_index="0",device_uuid="GPU-0a",model="NVIDIA H100 80GB HBM3",node="n1"} 312.5
 * vgpu_gpu_clock_event_reasons{...,reason="sw_power_cap"} 1.0
 * vgpu_gpu_xid_errors_total{...,xid="79"} 1.0
 * vgpu_gpu_health_unavailable{...,field="remapped_rows",reason="not_supported"} 1.0
 * </pre>
 */
public final class DeviceHealthCollector extends VgpuCollector {
  private static final String[] G = {L_NODE, L_DEVICE_INDEX, L_DEVICE_UUID, L_MODEL};

  private final NvmlSampler sampler;
  private static final FamilySpec.Gauge GPU_POWER =
      FamilySpec.gauge(MetricNames.GPU_POWER, "Board power draw (NVML nvmlDeviceGetPowerUsage)", G);
  private static final FamilySpec.Gauge GPU_TEMPERATURE =
      FamilySpec.gauge(
          MetricNames.GPU_TEMPERATURE,
          "GPU die temperature in degrees Celsius (NVML_TEMPERATURE_GPU)",
          G);
  private static final FamilySpec.Gauge GPU_CLOCK_EVENT_REASONS =
      FamilySpec.gauge(
          MetricNames.GPU_CLOCK_EVENT_REASONS,
          "1 while the reason holds the GPU clocks down (nvmlDeviceGetCurrentClocksEventReasons;"
              + " other: a bit this exporter does not name)",
          with(G, "reason"));
  private static final FamilySpec.Counter GPU_XID_ERRORS =
      FamilySpec.counter(
          MetricNames.GPU_XID_ERRORS,
          "XID errors NVML reported through events since the exporter started, by XID (other:"
              + " beyond the label bound)",
          with(G, "xid"));
  private static final FamilySpec.Counter GPU_ECC_VOLATILE_ERRORS =
      FamilySpec.counter(
          MetricNames.GPU_ECC_VOLATILE_ERRORS,
          "ECC errors since the driver loaded (NVML_VOLATILE_ECC), by error corrected or"
              + " uncorrected",
          with(G, "error"));
  private static final FamilySpec.Counter GPU_ECC_AGGREGATE_ERRORS =
      FamilySpec.counter(
          MetricNames.GPU_ECC_AGGREGATE_ERRORS,
          "ECC errors over the GPU's life (NVML_AGGREGATE_ECC), by error corrected or"
              + " uncorrected",
          with(G, "error"));
  private static final FamilySpec.Gauge GPU_REMAPPED_ROWS =
      FamilySpec.gauge(
          MetricNames.GPU_REMAPPED_ROWS,
          "Memory rows remapped to spares, by the cause correctable or uncorrectable",
          with(G, "cause"));
  private static final FamilySpec.Gauge GPU_ROW_REMAP_PENDING =
      FamilySpec.gauge(
          MetricNames.GPU_ROW_REMAP_PENDING, "1 while a row remapping waits for a GPU reset", G);
  private static final FamilySpec.Gauge GPU_ROW_REMAP_FAILURE =
      FamilySpec.gauge(
          MetricNames.GPU_ROW_REMAP_FAILURE,
          "1 when a row remapping failed (no spare row left): the GPU needs service",
          G);
  private static final FamilySpec.Gauge GPU_HEALTH_UNAVAILABLE =
      FamilySpec.gauge(
          MetricNames.GPU_HEALTH_UNAVAILABLE,
          "1 for a health field NVML does not give for the GPU, with the nvmlReturn_t name as"
              + " reason (not_supported, function_not_found, no_permission, ...)",
          with(G, "field", "reason"));
  private static final FamilySpec.Counter EXPORTER_XID_EVENTS_UNMATCHED =
      FamilySpec.counter(
          MetricNames.EXPORTER_XID_EVENTS_UNMATCHED,
          "XID events NVML delivered for a device handle that is no polled GPU (absent while"
              + " 0)",
          L_NODE);

  private static final List<FamilySpec> FAMILIES =
      List.of(
          GPU_POWER,
          GPU_TEMPERATURE,
          GPU_CLOCK_EVENT_REASONS,
          GPU_XID_ERRORS,
          GPU_ECC_VOLATILE_ERRORS,
          GPU_ECC_AGGREGATE_ERRORS,
          GPU_REMAPPED_ROWS,
          GPU_ROW_REMAP_PENDING,
          GPU_ROW_REMAP_FAILURE,
          GPU_HEALTH_UNAVAILABLE,
          EXPORTER_XID_EVENTS_UNMATCHED);

  public DeviceHealthCollector(NvmlSampler sampler) {
    super(FAMILIES);
    this.sampler = sampler;
  }

  private static String[] with(String[] base, String... more) {
    String[] out = java.util.Arrays.copyOf(base, base.length + more.length);
    System.arraycopy(more, 0, out, base.length, more.length);
    return out;
  }

  @Override
  protected void collect(NodeState state, Sink out) {
    String node = state.node();
    var power = families.gauge(GPU_POWER);
    var temperature = families.gauge(GPU_TEMPERATURE);
    var clocks = families.gauge(GPU_CLOCK_EVENT_REASONS);
    var xid = families.counter(GPU_XID_ERRORS);
    var eccVolatile = families.counter(GPU_ECC_VOLATILE_ERRORS);
    var eccAggregate = families.counter(GPU_ECC_AGGREGATE_ERRORS);
    var rows = families.gauge(GPU_REMAPPED_ROWS);
    var pending = families.gauge(GPU_ROW_REMAP_PENDING);
    var failure = families.gauge(GPU_ROW_REMAP_FAILURE);
    var unavailable = families.gauge(GPU_HEALTH_UNAVAILABLE);
    for (GpuSnapshot g : sampler.latest().gpus()) {
      if (g.identity().migIndex() >= 0) {
        continue; // health is the physical GPU's
      }
      DeviceHealth h = g.health();
      Labels l = NvmlCollector.gpuLabels(labels, node, g);
      h.powerMilliwatts().ifPresent(mw -> power.add(mw / 1000.0, l));
      h.temperatureCelsius().ifPresent(c -> temperature.add((double) c, l));
      h.clockEventReasons()
          .ifPresent(
              mask -> {
                for (ClockEventReason r : ClockEventReason.values()) {
                  clocks.add(r.activeIn(mask) ? 1 : 0, l.add("reason", r.label()));
                }
              });
      h.xidErrors().forEach((x, n) -> xid.add(n, l.add("xid", x)));
      h.volatileEcc().ifPresent(e -> ecc(eccVolatile, l, e));
      h.aggregateEcc().ifPresent(e -> ecc(eccAggregate, l, e));
      h.remappedRows()
          .ifPresent(
              r -> {
                rows.add((double) r.correctable(), l.add("cause", "correctable"));
                rows.add((double) r.uncorrectable(), l.add("cause", "uncorrectable"));
                pending.add(r.pending() ? 1 : 0, l);
                failure.add(r.failure() ? 1 : 0, l);
              });
      h.unavailable()
          .forEach(
              (field, code) ->
                  unavailable.add(1, l.add("field", field.label()).add("reason", code.name())));
    }
    out.add(power.build());
    out.add(temperature.build());
    out.add(clocks.build());
    out.add(xid.build());
    out.add(eccVolatile.build());
    out.add(eccAggregate.build());
    out.add(rows.build());
    out.add(pending.build());
    out.add(failure.build());
    out.add(unavailable.build());
    long unmatched = sampler.unmatchedXidEvents();
    var unmatchedFamily = families.counter(EXPORTER_XID_EVENTS_UNMATCHED);
    if (unmatched > 0) {
      unmatchedFamily.add((double) unmatched, labels.node(node));
    }
    out.add(unmatchedFamily.build());
  }

  private static void ecc(Families.Counter c, Labels l, EccCounts e) {
    c.add((double) e.corrected(), l.add("error", "corrected"));
    c.add((double) e.uncorrected(), l.add("error", "uncorrected"));
  }
}
