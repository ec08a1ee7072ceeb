package io.vgpu.exporter.cycles;

/** One half of a planted file-level cycle (FileCyclesTest must reject it). */
final class PlantedCycleA {
  static int viaB() {
    return PlantedCycleB.value() + 1;
  }

  static int value() {
    return 1;
  }
}
