package io.vgpu.exporter.text;

/**
 * An enum whose label (a metric label value, a report word) is its constant's name in lower case:
 * {@code NOT_IN_A_POD} is {@code not_in_a_pod}. Implemented by enums only; the labels are computed
 * once per enum, not per call (collectors ask for them per series every scrape).
 */
public interface SnakeCaseLabel {
  /** The constant's name ({@link Enum#name()}). */
  String name();

  /** The constant's name in lower case. */
  default String label() {
    return EnumLabels.of((Enum<?>) this);
  }
}
