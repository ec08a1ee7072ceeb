package io.vgpu.exporter.cycles;

/** A one-way use of {@link PlantedCycleA}: a chain, not a cycle (FileCyclesTest accepts it). */
final class PlantedChainTop {
  static int value() {
    return PlantedCycleA.value();
  }
}
