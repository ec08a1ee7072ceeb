package io.vgpu.exporter.testing;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** A small reader for Prometheus text exposition in tests (simple label values only). */
public final class Samples {
  /** One sample line. */
  public record Sample(String name, Map<String, String> labels, double value) {}

  private static final Pattern LINE =
      Pattern.compile("^([a-zA-Z_:][a-zA-Z0-9_:]*)(\\{(.*)})?\\s+(\\S+)$");
  private static final Pattern LABEL =
      Pattern.compile("([a-zA-Z_][a-zA-Z0-9_]*)=\"((?:[^\"\\\\]|\\\\.)*)\"");

  private final List<Sample> samples;

  private Samples(List<Sample> samples) {
    this.samples = samples;
  }

  public static Samples parse(String text) {
    List<Sample> out = new ArrayList<>();
    for (String line : text.split("\n", -1)) {
      if (line.isBlank() || line.startsWith("#")) {
        continue;
      }
      Matcher m = LINE.matcher(line);
      if (!m.matches()) {
        throw new IllegalArgumentException("unparseable line: " + line);
      }
      Map<String, String> labels = new LinkedHashMap<>();
      if (m.group(3) != null) {
        Matcher l = LABEL.matcher(m.group(3));
        while (l.find()) {
          labels.put(l.group(1), l.group(2));
        }
      }
      out.add(new Sample(m.group(1), labels, Double.parseDouble(m.group(4))));
    }
    return new Samples(out);
  }

  public List<Sample> all() {
    return samples;
  }

  public List<Sample> named(String name) {
    return samples.stream().filter(s -> s.name().equals(name)).toList();
  }

  /** Samples of {@code name} whose labels include every given pair (k1, v1, k2, v2, ...). */
  public List<Sample> find(String name, String... kv) {
    return named(name).stream()
        .filter(
            s -> {
              for (int i = 0; i < kv.length; i += 2) {
                if (!kv[i + 1].equals(s.labels().get(kv[i]))) {
                  return false;
                }
              }
              return true;
            })
        .toList();
  }

  /** The single value of {@code name} with the given labels. */
  public double value(String name, String... kv) {
    List<Sample> f = find(name, kv);
    if (f.size() != 1) {
      throw new AssertionError(
          "expected one sample of " + name + " " + List.of(kv) + ", found " + f);
    }
    return f.getFirst().value();
  }

  public Optional<Sample> first(String name, String... kv) {
    return find(name, kv).stream().findFirst();
  }
}
