package io.vgpu.exporter.doctor;

import io.vgpu.exporter.node.NodeEvidence;
import io.vgpu.regioncodec.DeviceHeader;
import io.vgpu.regioncodec.ExtensionDevice;
import io.vgpu.regioncodec.RegionSnapshot;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * 12: the limiter delayed launches during the window while utilization stayed far below the limit.
 * Needs libvgpu's extension counters in both samples.
 */
final class LimiterMisfiringCheck implements DoctorCheck {
  @Override
  public int number() {
    return 12;
  }

  @Override
  public String id() {
    return "limiter-misfiring";
  }

  @Override
  public String title() {
    return "limiter does not throttle below the limit";
  }

  private static Optional<ExtensionDevice> dev(Optional<RegionSnapshot> s, int index) {
    return s.flatMap(RegionSnapshot::extension)
        .flatMap(x -> x.devices().stream().filter(d -> d.index() == index).findFirst());
  }

  @Override
  public List<Finding> evaluate(NodeEvidence e) {
    List<Finding> out = new ArrayList<>();
    Checks.eachRegion(
        e,
        (c, r) -> {
          for (DeviceHeader d : Checks.latest(r).devices()) {
            if (!SmLimitNotEnforcedCheck.limited(d)) {
              continue;
            }
            String subject = Checks.container(c) + " device " + d.index();
            var before = dev(r.first(), d.index());
            var after = dev(r.second(), d.index());
            if (before.isEmpty() || after.isEmpty()) {
              out.add(
                  skip(
                      subject, "no limiter counters (HAMi-core regions do not record throttling)"));
              continue;
            }
            long throttledNanos = after.get().throttledNanos() - before.get().throttledNanos();
            long delayed = after.get().launchesDelayed() - before.get().launchesDelayed();
            Optional<Double> util =
                e.nvml().status().up()
                    ? SmLimitNotEnforcedCheck.utilizationPercent(e, c, r, d)
                    : Optional.empty();
            if (util.isEmpty()) {
              long ppm = after.get().limiterWindowPpm();
              util = ppm > 0 ? Optional.of(ppm / 10_000.0) : Optional.empty();
            }
            List<String> ev = new ArrayList<>();
            ev.add(
                "over "
                    + e.window().toMillis()
                    + " ms: "
                    + delayed
                    + " launch(es) delayed, "
                    + throttledNanos / 1_000_000
                    + " ms throttled");
            util.ifPresent(
                u ->
                    ev.add(
                        String.format(
                            java.util.Locale.ROOT,
                            "utilization %.0f%% against a limit of %d%%",
                            u,
                            d.smLimitPercent())));
            if ((throttledNanos > 0 || delayed > 0)
                && util.isPresent()
                && util.get() < d.smLimitPercent() * e.thresholds().limiterFarBelowRatio()) {
              out.add(
                  finding(
                      Severity.WARN,
                      subject,
                      "the limiter throttles while utilization is far below the limit",
                      ev,
                      "Launch-cost estimates are off for this workload (many tiny kernels?) or recent_kernel<0 (a higher-priority task blocks it: check priority); compare vgpu_limiter_throttled_seconds_total with utilization over a longer range."));
            } else {
              out.add(ok(subject, "throttling consistent with utilization", ev));
            }
          }
        });
    return Checks.orSkip(this, out, "no SM-limited containers");
  }
}
