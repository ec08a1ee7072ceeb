package io.vgpu.exporter.config;

import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.regex.Pattern;

/**
 * One command-line flag of the exporter: its name, environment fallbacks, default, help text and
 * the parser that validates a raw value. Every flag the exporter reads is a constant in {@link
 * Flags}; tests, the Helm chart tests and README generation enumerate {@link Flags#ALL}.
 *
 * @param name the flag without leading dashes, e.g. {@code web.listen-port}
 * @param description one sentence for {@code --help} and the README
 * @param defaultValue the raw default, parsed like any other value ("" means unset/empty)
 * @param envAliases extra environment variables read after {@link #envVar()} (e.g. NODE_NAME)
 * @param parser turns a raw string into the typed value; throws {@link IllegalArgumentException}
 *     with a message that says what is expected
 * @param <T> the parsed type
 */
public record Flag<T>(
    String name,
    String description,
    String defaultValue,
    List<String> envAliases,
    Parser<T> parser,
    String valueLabel) {

  private static final Pattern NAME = Pattern.compile("[a-z][a-z0-9]*([.-][a-z0-9]+)*");

  /** Parses and validates one raw value. */
  @FunctionalInterface
  public interface Parser<T> {
    /**
     * Returns the typed value.
     *
     * @throws IllegalArgumentException with a message that tells what a valid value looks like
     */
    T parse(String raw);
  }

  public Flag {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(description, "description");
    Objects.requireNonNull(defaultValue, "defaultValue");
    Objects.requireNonNull(parser, "parser");
    Objects.requireNonNull(valueLabel, "valueLabel");
    envAliases = List.copyOf(envAliases);
    if (!NAME.matcher(name).matches()) {
      throw new IllegalArgumentException(
          "flag name must be lower-case words joined by . or -: " + name);
    }
    if (description.isBlank()) {
      throw new IllegalArgumentException("flag " + name + " needs a description");
    }
  }

  /** {@code --name}: the spelling on the command line. */
  public String option() {
    return "--" + name;
  }

  /** {@code VGPU_EXPORTER_<NAME>}, with every non-alphanumeric character as an underscore. */
  public String envVar() {
    return "VGPU_EXPORTER_" + name.toUpperCase(Locale.ROOT).replaceAll("[^A-Z0-9]", "_");
  }

  /** Environment variables in lookup order: {@link #envVar()} then the aliases. */
  public List<String> envVars() {
    return java.util.stream.Stream.concat(java.util.stream.Stream.of(envVar()), envAliases.stream())
        .toList();
  }

  /**
   * Parses {@code raw} from {@code source}.
   *
   * @throws ConfigException naming the flag, the source and what is expected
   */
  public T parse(String raw, String source) {
    try {
      return parser.parse(raw.strip());
    } catch (IllegalArgumentException e) {
      throw new ConfigException(
          "invalid value '%s' for %s (from %s): %s"
              .formatted(raw, option(), source, e.getMessage()));
    }
  }

  /** The parsed default; a definition whose default does not parse is a programming error. */
  public T defaultParsed() {
    return parse(defaultValue, "default");
  }
}
