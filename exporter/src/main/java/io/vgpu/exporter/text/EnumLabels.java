package io.vgpu.exporter.text;

import java.util.HashMap;
import java.util.Locale;
import java.util.Map;

/** The lower-case names of an enum's constants, computed once per enum ({@link SnakeCaseLabel}). */
final class EnumLabels {
  private static final ClassValue<Map<Object, String>> LABELS =
      new ClassValue<>() {
        @Override
        protected Map<Object, String> computeValue(Class<?> type) {
          Map<Object, String> out = new HashMap<>();
          for (Object constant : type.getEnumConstants()) {
            out.put(constant, ((Enum<?>) constant).name().toLowerCase(Locale.ROOT));
          }
          return Map.copyOf(out);
        }
      };

  private EnumLabels() {}

  static String of(Enum<?> constant) {
    return LABELS.get(constant.getDeclaringClass()).get(constant);
  }
}
