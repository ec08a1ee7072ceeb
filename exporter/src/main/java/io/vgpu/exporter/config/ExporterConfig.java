package io.vgpu.exporter.config;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * The validated configuration: one typed value per {@link Flags#ALL} entry. Resolution order per
 * flag: command line, then {@code VGPU_EXPORTER_<NAME>}, then aliases (e.g. {@code NODE_NAME}),
 * then the default. Immutable and thread-safe.
 */
public final class ExporterConfig {
  private final IdentityHashMap<Flag<?>, Object> values;
  private final IdentityHashMap<Flag<?>, String> sources;

  private ExporterConfig(
      IdentityHashMap<Flag<?>, Object> values, IdentityHashMap<Flag<?>, String> sources) {
    this.values = values;
    this.sources = sources;
  }

  /**
   * Resolves every flag.
   *
   * @param commandLine raw values by flag name (without dashes) from the command line
   * @param env the environment (System.getenv() in production)
   * @throws ConfigException listing every bad value, each with flag, source and what is expected
   */
  public static ExporterConfig resolve(Map<String, String> commandLine, Map<String, String> env) {
    IdentityHashMap<Flag<?>, Object> values = new IdentityHashMap<>();
    IdentityHashMap<Flag<?>, String> sources = new IdentityHashMap<>();
    List<String> problems = new ArrayList<>();
    for (String name : commandLine.keySet()) {
      if (Flags.ALL.stream().noneMatch(f -> f.name().equals(name))) {
        problems.add("unknown flag --" + name);
      }
    }
    for (Flag<?> flag : Flags.ALL) {
      String raw = commandLine.get(flag.name());
      String source = "command line " + flag.option();
      if (raw == null) {
        for (String var : flag.envVars()) {
          String v = env.get(var);
          if (v != null && !v.isEmpty()) {
            raw = v;
            source = "environment " + var;
            break;
          }
        }
      }
      if (raw == null) {
        raw = flag.defaultValue();
        source = "default";
      }
      try {
        values.put(flag, flag.parse(raw, source));
        sources.put(flag, source);
      } catch (ConfigException e) {
        problems.addAll(e.problems());
      }
    }
    if (!problems.isEmpty()) {
      throw new ConfigException(problems);
    }
    return new ExporterConfig(values, sources);
  }

  /** Every flag at its default (no environment). */
  public static ExporterConfig defaults() {
    return resolve(Map.of(), Map.of());
  }

  /** A copy with one flag replaced by an already-typed value (tests, demo). */
  public <T> ExporterConfig with(Flag<T> flag, T value) {
    Objects.requireNonNull(value, "value");
    IdentityHashMap<Flag<?>, Object> copy = new IdentityHashMap<>(values);
    IdentityHashMap<Flag<?>, String> src = new IdentityHashMap<>(sources);
    copy.put(flag, value);
    src.put(flag, "override");
    return new ExporterConfig(copy, src);
  }

  /** The typed value of {@code flag}. */
  @SuppressWarnings("unchecked") // values.put only ever stores flag.parse(...) results of type T
  public <T> T get(Flag<T> flag) {
    Object v = values.get(flag);
    if (v == null) {
      throw new IllegalArgumentException("flag " + flag.option() + " is not listed in Flags.ALL");
    }
    return (T) v;
  }

  /** Where the value of {@code flag} came from (for the startup log line). */
  public String source(Flag<?> flag) {
    return sources.getOrDefault(flag, "default");
  }

  /** Name and value of every flag, for the startup log. */
  public Map<String, String> describe() {
    Map<String, String> out = new HashMap<>();
    for (Flag<?> f : Flags.ALL) {
      out.put(f.name(), String.valueOf(values.get(f)));
    }
    return out;
  }

  // Convenience accessors for the values most components read.

  public Path cacheRoot() {
    return get(Flags.CACHE_ROOT);
  }

  public Path procfs() {
    return get(Flags.PROCFS);
  }

  public int port() {
    return get(Flags.WEB_LISTEN_PORT);
  }

  /** How long a rendered /metrics page may be served again ({@link Flags#WEB_METRICS_MAX_AGE}). */
  public Duration metricsMaxAge() {
    return get(Flags.WEB_METRICS_MAX_AGE);
  }

  public String bindAddress() {
    return get(Flags.WEB_LISTEN_ADDRESS);
  }

  public Duration rescanInterval() {
    return get(Flags.RESCAN_INTERVAL);
  }

  public boolean kubernetes() {
    return get(Flags.KUBERNETES);
  }

  public boolean hamiCompat() {
    return get(Flags.HAMI_COMPAT);
  }

  /** {@code --node-name}, else {@code NODE_NAME}, else the host name, else "localhost". */
  public String nodeName() {
    String n = get(Flags.NODE_NAME);
    if (!n.isEmpty()) {
      return n;
    }
    return hostName().orElse("localhost");
  }

  private static Optional<String> hostName() {
    try {
      return Optional.of(InetAddress.getLocalHost().getHostName());
    } catch (UnknownHostException e) {
      return Optional.empty();
    }
  }
}
