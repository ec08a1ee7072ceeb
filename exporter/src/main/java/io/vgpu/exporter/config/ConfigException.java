package io.vgpu.exporter.config;

import java.util.List;

/**
 * A configuration value that cannot be used. The message names the flag, where the value came from
 * and what a valid value looks like; {@link #problems()} lists every bad value found.
 */
public final class ConfigException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final List<String> problems;

  public ConfigException(String problem) {
    this(List.of(problem));
  }

  public ConfigException(List<String> problems) {
    super(String.join("\n", problems));
    this.problems = List.copyOf(problems);
  }

  /** Every problem, one per bad value. */
  public List<String> problems() {
    return problems;
  }
}
