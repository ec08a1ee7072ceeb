package io.vgpu.exporter.cli;

import java.util.Map;
import picocli.CommandLine;
import picocli.CommandLine.Help;
import picocli.CommandLine.Help.Column;
import picocli.CommandLine.Help.TextTable;

/**
 * The top-level help's command list. Picocli's own shows only the first source line of each
 * subcommand's description, which cuts sentences mid-way; this one shows each subcommand's first
 * whole sentence, wrapped to the usage width.
 */
final class CommandListSection implements CommandLine.IHelpSectionRenderer {
  private static final int INDENT = 2;

  static void install(CommandLine root) {
    root.getHelpSectionMap()
        .put(CommandLine.Model.UsageMessageSpec.SECTION_KEY_COMMAND_LIST, new CommandListSection());
  }

  @Override
  public String render(Help help) {
    Map<String, Help> subcommands = help.subcommands();
    if (subcommands.isEmpty()) {
      return "";
    }
    int nameWidth =
        subcommands.keySet().stream().mapToInt(String::length).max().orElse(0) + 2 * INDENT;
    int width = help.commandSpec().usageMessage().width();
    TextTable table =
        TextTable.forColumns(
            help.colorScheme(),
            new Column(nameWidth, INDENT, Column.Overflow.SPAN),
            new Column(width - nameWidth, INDENT, Column.Overflow.WRAP));
    for (Map.Entry<String, Help> e : subcommands.entrySet()) {
      String[] description = e.getValue().commandSpec().usageMessage().description();
      table.addRowValues(
          help.colorScheme().commandText(e.getKey()),
          help.colorScheme().text(firstSentence(description)));
    }
    return table.toString();
  }

  /** The description's lines joined, up to and including the first full stop ending a sentence. */
  static String firstSentence(String[] description) {
    String text = String.join(" ", description).replaceAll("\\s+", " ").strip();
    var m = java.util.regex.Pattern.compile("\\.\\s+(?=[A-Z])").matcher(text);
    return m.find() ? text.substring(0, m.start() + 1) : text;
  }
}
