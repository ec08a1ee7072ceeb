package io.vgpu.exporter.discovery;

import java.util.Objects;
import java.util.function.Consumer;
import java.util.function.Predicate;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Removes directories of pods that are gone, after each discovery pass. Only installed with {@code
 * --stale.remove=true}; the staleness decision (API server authoritative, pod absent, older than
 * the grace period) is the caller's predicate, the same one that drives {@code
 * vgpu_container_stale}.
 */
public final class StaleReaper implements Consumer<DiscoverySnapshot> {
  private static final Logger LOG = LoggerFactory.getLogger(StaleReaper.class);

  private final CacheDiscovery discovery;
  private final Predicate<DiscoveredContainer> stale;

  public StaleReaper(CacheDiscovery discovery, Predicate<DiscoveredContainer> stale) {
    this.discovery = Objects.requireNonNull(discovery, "discovery");
    this.stale = Objects.requireNonNull(stale, "stale");
  }

  @Override
  public void accept(DiscoverySnapshot snapshot) {
    for (DiscoveredContainer c : snapshot.containers()) {
      if (stale.test(c)) {
        LOG.atInfo()
            .setMessage("removing stale cache directory")
            .addKeyValue("pod_uid", c.key().podUid())
            .addKeyValue("container", c.key().containerName())
            .log();
        discovery.removeDirectory(c.key());
      }
    }
  }
}
