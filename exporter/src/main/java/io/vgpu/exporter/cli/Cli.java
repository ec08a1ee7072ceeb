package io.vgpu.exporter.cli;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Supplier;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/**
 * {@code bin/vgpu-exporter [serve|demo|version|...] [flags]}. {@code serve} is the default when the
 * first argument is a flag or absent. Subcommands are listed in {@link #SUBCOMMANDS}; the operator
 * tools (inspect, doctor, cleanup) add theirs there.
 */
public final class Cli {
  /** Subcommand name to a factory of its picocli command object. */
  public static final Map<String, Supplier<Object>> SUBCOMMANDS = subcommands();

  private static Map<String, Supplier<Object>> subcommands() {
    Map<String, Supplier<Object>> m = new LinkedHashMap<>();
    m.put("serve", ServeCommand::new);
    m.put("demo", DemoCommand::new);
    m.put("version", VersionCommand::new);
    // operator tools (issue 8)
    m.put("inspect", io.vgpu.exporter.cli.InspectCommand::new);
    m.put("doctor", io.vgpu.exporter.cli.DoctorCommand::new);
    m.put("cleanup", io.vgpu.exporter.cli.CleanupCommand::new);
    m.put("unlock", io.vgpu.exporter.cli.UnlockCommand::new);
    return java.util.Collections.unmodifiableMap(m);
  }

  private static final Set<String> ROOT_OPTIONS = Set.of("-h", "--help");

  private Cli() {}

  @Command(
      name = "vgpu-exporter",
      mixinStandardHelpOptions = false,
      description = "Per-pod GPU sharing metrics for HAMi-style vGPU nodes.",
      subcommandsRepeatable = false)
  static final class Root implements Runnable {
    @CommandLine.Spec CommandLine.Model.CommandSpec spec;

    @CommandLine.Option(
        names = {"-h", "--help"},
        usageHelp = true,
        description = "Show this help.")
    boolean help;

    @Override
    public void run() {
      spec.commandLine().usage(spec.commandLine().getOut());
    }
  }

  /** Builds the command tree with the given streams (tests pass their own). */
  public static CommandLine commandLine(PrintWriter out, PrintWriter err) {
    CommandLine cl = new CommandLine(new Root());
    for (var e : SUBCOMMANDS.entrySet()) {
      Object cmd = e.getValue().get();
      CommandLine sub = new CommandLine(cmd);
      if (cmd instanceof FlagOptions.Host host) {
        FlagOptions.addTo(sub.getCommandSpec(), host);
      }
      cl.addSubcommand(e.getKey(), sub);
    }
    cl.setOut(out);
    cl.setErr(err);
    CommandListSection.install(cl);
    // A bad flag or argument: one error line, picocli's suggestion if it has one, and where the
    // usage is, not the whole usage (over 150 lines for serve).
    cl.setParameterExceptionHandler(
        (ex, args) -> {
          CommandLine c = ex.getCommandLine();
          PrintWriter e = c.getErr();
          e.println("error: " + ex.getMessage());
          CommandLine.UnmatchedArgumentException.printSuggestions(ex, e);
          e.println("run '" + c.getCommandSpec().qualifiedName() + " --help' for the flags");
          e.flush();
          return 2;
        });
    cl.setExecutionExceptionHandler(
        (ex, commandLine, parseResult) -> {
          if (ex instanceof io.vgpu.exporter.config.ConfigException ce) {
            for (String p : ce.problems()) {
              commandLine.getErr().println("error: " + p);
            }
            commandLine.getErr().flush();
            return 2;
          }
          throw ex;
        });
    return cl;
  }

  /** Runs the CLI and returns the exit code (Main exits with it). */
  public static int run(String[] args, PrintWriter out, PrintWriter err) {
    List<String> a = new ArrayList<>(Arrays.asList(args));
    if (a.isEmpty() || (a.get(0).startsWith("-") && !ROOT_OPTIONS.contains(a.get(0)))) {
      a.add(0, "serve");
    }
    return commandLine(out, err).execute(a.toArray(String[]::new));
  }
}
