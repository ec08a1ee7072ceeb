package io.vgpu.exporter.demo;

import java.util.function.LongSupplier;

/**
 * The demo GPUs' total energy counters (what {@code nvmlDeviceGetTotalEnergyConsumption} returns),
 * from a simple power model of an H100-class board: {@link #IDLE_WATTS} with nothing running,
 * rising linearly with SM utilization to {@link #BUSY_WATTS}. Each call integrates the power of the
 * utilization it is given over the time since the previous call for that GPU.
 *
 * <p>Not thread safe: the demo's tick calls it under the node's lock.
 */
public final class FakeGpuEnergy {
  /** Board power with no kernel running (an H100 SXM idles at 60-90 W). */
  public static final double IDLE_WATTS = 70;

  /** Board power at full SM utilization (an H100 SXM's limit is 700 W). */
  public static final double BUSY_WATTS = 650;

  private final LongSupplier nanoTime;
  private final long[] millijoules = new long[16];
  private final long[] lastNanos = new long[16];
  private final double[] fraction = new double[16];

  public FakeGpuEnergy() {
    this(System::nanoTime);
  }

  FakeGpuEnergy(LongSupplier nanoTime) {
    this.nanoTime = nanoTime;
    // a counter since "driver load": some energy is already there, as on a real node
    for (int g = 0; g < millijoules.length; g++) {
      millijoules[g] = 3_600_000L * (17 + g);
    }
    java.util.Arrays.fill(lastNanos, Long.MIN_VALUE);
  }

  /**
   * The counter of GPU {@code gpu} (0-15) after running at {@code utilPercent} since last asked.
   */
  public long advance(int gpu, int utilPercent) {
    long now = nanoTime.getAsLong();
    if (lastNanos[gpu] != Long.MIN_VALUE && now > lastNanos[gpu]) {
      double watts =
          IDLE_WATTS + (BUSY_WATTS - IDLE_WATTS) * Math.clamp(utilPercent, 0, 100) / 100.0;
      double mj = watts * (now - lastNanos[gpu]) / 1e6 + fraction[gpu];
      long whole = (long) Math.floor(mj);
      millijoules[gpu] += whole;
      fraction[gpu] = mj - whole;
    }
    lastNanos[gpu] = now;
    return millijoules[gpu];
  }

  /**
   * The fake NVML's {@code health} line for a GPU at {@code utilPercent}: the power of the model
   * above, a die warming from 32 °C with load, {@code gpu_idle} as the clock event reason while
   * nothing runs, clean ECC counters and row remapper, XID events supported (as an H100).
   */
  public static String healthLine(int gpu, int utilPercent) {
    int u = Math.clamp(utilPercent, 0, 100);
    long milliwatts = Math.round((IDLE_WATTS + (BUSY_WATTS - IDLE_WATTS) * u / 100.0) * 1000);
    return "health %d power=%d temp=%d clocks=%d ecc=0,0,0,0 remap=0,0,0,0 events=1%n"
        .formatted(gpu, milliwatts, 32 + u * 40 / 100, u == 0 ? 1 : 0);
  }
}
