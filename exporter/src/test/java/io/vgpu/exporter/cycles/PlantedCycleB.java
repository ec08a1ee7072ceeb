package io.vgpu.exporter.cycles;

/** The other half of the planted cycle: uses {@link PlantedCycleA}, which uses this. */
final class PlantedCycleB {
  static int value() {
    return PlantedCycleA.value() + 1;
  }
}
