package io.vgpu.exporter.cli;

import io.vgpu.exporter.config.Flag;
import io.vgpu.exporter.config.Flags;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Model.OptionSpec;
import picocli.CommandLine.ParseResult;

/** Turns {@link Flags#ALL} into picocli options, and a parse result back into raw values. */
final class FlagOptions {
  /** A command that takes the exporter flags. */
  interface Host {
    /** The flags it takes (default: all of them, as {@code serve}). */
    default List<Flag<?>> flags() {
      return Flags.ALL;
    }

    /** False when the command has its own way to pick the port (demo's --port). */
    default boolean includeListenFlags() {
      return true;
    }
  }

  /**
   * Earlier spellings that stay accepted, by flag: the node commands' own options before they read
   * the shared definitions. The environment variables are the flags' own ({@link Flag#envVars()}).
   */
  static final Map<Flag<?>, List<String>> ALIASES =
      Map.of(
          Flags.CACHE_ROOT, List.of("--cache-root"),
          Flags.PROCFS, List.of("--proc-root"),
          Flags.NVML_LIBRARY, List.of("--nvml-library"),
          Flags.NODE_NAME, List.of("--node"));

  private static final Set<String> BOOLEAN_DEFAULTS = Set.of("true", "false");

  private FlagOptions() {}

  @SuppressWarnings("ReferenceEquality") // each Flag is one constant: identity is its equality
  static void addTo(CommandSpec spec, Host host) {
    boolean includeListen = host.includeListenFlags();
    for (Flag<?> f : host.flags()) {
      if (!includeListen && (f == Flags.WEB_LISTEN_PORT || f == Flags.WEB_LISTEN_ADDRESS)) {
        continue;
      }
      OptionSpec.Builder b =
          OptionSpec.builder(f.option(), ALIASES.getOrDefault(f, List.of()).toArray(String[]::new))
              .paramLabel("<" + f.valueLabel() + ">")
              .type(String.class)
              .description(
                  f.description()
                      + " Env: "
                      + String.join(", ", f.envVars())
                      + ". Default: "
                      + (f.defaultValue().isEmpty() ? "(empty)" : f.defaultValue())
                      + ".");
      if (BOOLEAN_DEFAULTS.contains(f.defaultValue())) {
        b.arity("0..1").fallbackValue("true");
      } else {
        b.arity("1");
      }
      spec.addOption(b.build());
    }
  }

  /** Raw values of the flags given on the command line, by flag name. */
  static Map<String, String> values(ParseResult pr) {
    Map<String, String> out = new HashMap<>();
    for (Flag<?> f : Flags.ALL) {
      if (pr.commandSpec().findOption(f.option()) != null && pr.hasMatchedOption(f.option())) {
        String v = pr.matchedOptionValue(f.option(), "");
        out.put(f.name(), v);
      }
    }
    return out;
  }
}
