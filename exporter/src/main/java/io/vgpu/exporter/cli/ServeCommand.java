package io.vgpu.exporter.cli;

import io.vgpu.exporter.ExporterApp;
import io.vgpu.exporter.config.ExporterConfig;
import io.vgpu.exporter.config.Flags;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/** {@code serve}: run the exporter until SIGTERM/SIGINT. */
@Command(
    name = "serve",
    description = "Run the exporter (default). Every flag also reads VGPU_EXPORTER_<FLAG>.",
    mixinStandardHelpOptions = true)
final class ServeCommand implements Callable<Integer>, FlagOptions.Host {
  @CommandLine.Spec CommandLine.Model.CommandSpec spec;

  @Override
  public Integer call() throws InterruptedException {
    ExporterConfig config =
        ExporterConfig.resolve(
            FlagOptions.values(spec.commandLine().getParseResult()), System.getenv());
    LogSetup.configure(config.get(Flags.LOG_LEVEL), config.get(Flags.LOG_FORMAT));
    ExporterApp app = ExporterApp.builder(config).build();
    CountDownLatch stop = new CountDownLatch(1);
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  app.close();
                  stop.countDown();
                },
                "vgpu-shutdown"));
    try {
      app.start();
    } catch (RuntimeException e) {
      app.close();
      throw new io.vgpu.exporter.config.ConfigException(
          "cannot serve on %s:%d: %s"
              .formatted(config.bindAddress(), config.port(), DemoCommand.rootMessage(e)));
    }
    stop.await();
    return 0;
  }
}
