package io.vgpu.exporter.text;

import java.util.Locale;
import tools.jackson.core.SerializableString;
import tools.jackson.core.io.CharacterEscapes;
import tools.jackson.core.io.SerializedString;
import tools.jackson.core.json.JsonFactory;
import tools.jackson.databind.json.JsonMapper;

/**
 * A Jackson mapper whose output is safe to print: besides JSON's own escapes it writes every
 * character {@link TenantText} calls unsafe for a terminal (DEL, C1 controls, bidirectional
 * controls, line/paragraph separators) and every surrogate as {@code \}{@code uXXXX}, so the JSON
 * stays exact (nothing is dropped) and a terminal or log viewer never acts on what a tenant wrote.
 */
public final class SafeJson {
  private static final JsonMapper MAPPER =
      JsonMapper.builder(JsonFactory.builder().characterEscapes(new TerminalSafe()).build())
          .build();

  private SafeJson() {}

  /** Thread-safe and immutable. */
  public static JsonMapper mapper() {
    return MAPPER;
  }

  private static final class TerminalSafe extends CharacterEscapes {
    private static final long serialVersionUID = 1L;
    private final int[] ascii;

    TerminalSafe() {
      ascii = standardAsciiEscapesForJSON();
      ascii[0x7f] = ESCAPE_CUSTOM;
    }

    @Override
    public int[] getEscapeCodesForAscii() {
      return ascii.clone();
    }

    @Override
    public SerializableString getEscapeSequence(int ch) {
      char c = (char) ch;
      if (Character.isSurrogate(c) || TenantText.unsafe(c, String.valueOf(c), 0)) {
        return new SerializedString(String.format(Locale.ROOT, "\\u%04x", ch));
      }
      return null;
    }
  }
}
