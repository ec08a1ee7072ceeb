package io.vgpu.exporter.cli;

import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.spi.Configurator;
import ch.qos.logback.classic.spi.ConfiguratorRank;
import ch.qos.logback.core.spi.ContextAwareBase;

/**
 * Logback's start-up configuration in code (found through {@code META-INF/services}), the same as
 * {@link LogSetup} with its defaults: INFO, logfmt on stderr. A logback.xml did this before;
 * parsing it loaded the XML parser and logback's configuration model, ~600 classes (a tenth of the
 * exporter's classes and metaspace) that are never used again once the flags are read.
 */
@ConfiguratorRank(ConfiguratorRank.CUSTOM_HIGH_PRIORITY)
public final class StartupLogConfigurator extends ContextAwareBase implements Configurator {
  @Override
  public ExecutionStatus configure(LoggerContext context) {
    LogSetup.configure(context, "info", "logfmt");
    return ExecutionStatus.DO_NOT_INVOKE_NEXT_IF_ANY;
  }
}
