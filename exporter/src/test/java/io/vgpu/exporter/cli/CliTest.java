package io.vgpu.exporter.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.config.Flag;
import io.vgpu.exporter.config.Flags;
import java.io.PrintWriter;
import java.io.StringWriter;
import org.junit.jupiter.api.Test;

class CliTest {
  private final StringWriter out = new StringWriter();
  private final StringWriter err = new StringWriter();

  private int run(String... args) {
    return Cli.run(args, new PrintWriter(out, true), new PrintWriter(err, true));
  }

  @Test
  void version_printsVersionAndExitsZero() {
    assertThat(run("version")).isZero();
    assertThat(out.toString()).startsWith("vgpu-exporter ").contains("revision");
  }

  @Test
  void serve_badValues_exitsTwoWithOneClearLinePerProblem() {
    int code = run("--web.listen-port=99999", "--log.level", "chatty");
    assertThat(code).isEqualTo(2);
    assertThat(err.toString().lines().filter(l -> l.startsWith("error: ")).count()).isEqualTo(2);
    assertThat(err.toString()).contains("--web.listen-port").contains("--log.level");
  }

  @Test
  void serve_help_listsEveryFlagWithItsEnvVar() {
    assertThat(run("serve", "--help")).isZero();
    for (Flag<?> f : Flags.ALL) {
      assertThat(out.toString()).contains(f.option()).contains(f.envVar());
    }
  }

  @Test
  void unknownOption_isRejected_withAShortErrorNotTheWholeUsage() {
    assertThat(run("--no-such-flag")).isEqualTo(2);
    assertThat(err.toString())
        .startsWith("error: ")
        .contains("--no-such-flag")
        .contains("vgpu-exporter serve --help")
        .doesNotContain("--web.listen-port");
    assertThat(err.toString().lines().count()).as(err.toString()).isLessThanOrEqualTo(4);
    assertThat(out.toString()).isEmpty();
  }

  @Test
  void misspelledOption_getsASuggestion() {
    assertThat(run("serve", "--web.listen-prot=1")).isEqualTo(2);
    assertThat(err.toString()).contains("--web.listen-port");
    assertThat(err.toString().lines().count()).as(err.toString()).isLessThanOrEqualTo(6);
  }

  @Test
  void demo_help_offersPort() {
    assertThat(run("demo", "--help")).isZero();
    assertThat(out.toString()).contains("--port");
  }

  @Test
  void topLevelHelp_describesEveryCommandInWholeSentences() {
    assertThat(run("--help")).isZero();
    String help = out.toString();
    java.util.Map<String, StringBuilder> entries = new java.util.LinkedHashMap<>();
    StringBuilder current = null;
    boolean inCommands = false;
    for (String line : help.lines().toList()) {
      if (line.equals("Commands:")) {
        inCommands = true;
      } else if (inCommands && line.matches("  \\S.*")) {
        String[] nameAndText = line.strip().split("\\s+", 2);
        current = new StringBuilder(nameAndText.length > 1 ? nameAndText[1] : "");
        entries.put(nameAndText[0], current);
      } else if (inCommands && current != null && line.matches("\\s{3,}\\S.*")) {
        current.append(' ').append(line.strip());
      }
    }
    assertThat(entries.keySet()).as(help).containsExactlyElementsOf(Cli.SUBCOMMANDS.keySet());
    entries.forEach(
        (name, text) -> assertThat(text.toString()).as(name + " in\n" + help).endsWith("."));
  }
}
