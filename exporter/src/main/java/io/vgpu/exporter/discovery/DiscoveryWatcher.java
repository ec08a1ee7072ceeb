package io.vgpu.exporter.discovery;

import static java.nio.file.StandardWatchEventKinds.ENTRY_CREATE;
import static java.nio.file.StandardWatchEventKinds.ENTRY_DELETE;
import static java.nio.file.StandardWatchEventKinds.ENTRY_MODIFY;
import static java.nio.file.StandardWatchEventKinds.OVERFLOW;

import java.io.IOException;
import java.nio.file.ClosedWatchServiceException;
import java.nio.file.Path;
import java.nio.file.WatchKey;
import java.nio.file.WatchService;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import org.slf4j.Logger;

/**
 * {@link CacheDiscovery}'s inotify side: one WatchService over the cache root and every container
 * directory a pass read, and the thread that turns its events into a rescan request. Without it
 * (inotify unavailable) the periodic rescan alone finds changes.
 *
 * <p>Thread-safety: {@link #watch} and {@link #forgetUnseen} run under the discovery's lock (a
 * pass); the watch loop runs on its own thread and only reads the service.
 */
final class DiscoveryWatcher {
  // The discovery\'s own logger: operators (and tests) find these lines under CacheDiscovery.
  private final Logger log;

  private final Runnable onEvent;
  private final Map<Path, WatchKey> watchedDirs = new HashMap<>();
  private WatchService watcher;
  private Thread watchThread;

  /**
   * @param onEvent asked for a pass when a watched directory changes (or events were lost)
   * @param log where its lines go
   */
  DiscoveryWatcher(Runnable onEvent, Logger log) {
    this.onEvent = onEvent;
    this.log = log;
  }

  /** Opens the watch service for {@code root}'s file system and starts the watch thread. */
  void start(Path root) {
    try {
      watcher = root.getFileSystem().newWatchService();
      watchThread =
          Thread.ofPlatform().daemon().name("vgpu-discovery-watch").start(this::superviseWatchLoop);
    } catch (IOException e) {
      log.atWarn()
          .setMessage("inotify unavailable, relying on periodic rescan")
          .addKeyValue("error", e.toString())
          .log();
    }
  }

  /** Restarts the watch loop after anything it throws; ends when the watch service closes. */
  private void superviseWatchLoop() {
    while (true) {
      try {
        watchLoop();
        return;
      } catch (Throwable t) { // an Error must not end inotify-driven discovery
        try {
          log.atError()
              .setMessage("discovery watch loop failed; restarting")
              .addKeyValue("error", t.toString())
              .log();
          onEvent.run();
          Thread.sleep(1000);
        } catch (InterruptedException e) {
          return;
        } catch (Throwable ignored) {
          // logging may fail when memory is short; the loop restarts regardless
        }
      }
    }
  }

  @SuppressWarnings("ReferenceEquality") // WatchEvent kinds are singletons (OVERFLOW)
  private void watchLoop() {
    WatchService ws = watcher;
    while (true) {
      WatchKey key;
      try {
        key = ws.take();
      } catch (InterruptedException | ClosedWatchServiceException e) {
        return;
      }
      boolean relevant = false;
      for (var ev : key.pollEvents()) {
        relevant |= ev.kind() == OVERFLOW || ev.context() != null;
      }
      key.reset();
      if (relevant) {
        onEvent.run();
      }
    }
  }

  /** Watches {@code dir} (once; nothing without a watch service). */
  void watch(Path dir) {
    WatchService ws = watcher;
    if (ws == null || watchedDirs.containsKey(dir)) {
      return;
    }
    try {
      watchedDirs.put(dir, dir.register(ws, ENTRY_CREATE, ENTRY_DELETE, ENTRY_MODIFY));
    } catch (IOException | ClosedWatchServiceException e) {
      log.atDebug()
          .setMessage("cannot watch")
          .addKeyValue("dir", dir)
          .addKeyValue("error", e.toString())
          .log();
    }
  }

  /** Stops watching every directory but {@code root} that the last pass did not read. */
  void forgetUnseen(Path root, Set<Path> seenDirs) {
    for (var it = watchedDirs.entrySet().iterator(); it.hasNext(); ) {
      var e = it.next();
      if (!e.getKey().equals(root) && !seenDirs.contains(e.getKey())) {
        e.getValue().cancel();
        it.remove();
      }
    }
  }

  /** Closes the watch service (which ends the loop) and interrupts the watch thread. */
  void close() {
    if (watcher != null) {
      try {
        watcher.close();
      } catch (IOException e) {
        log.atDebug()
            .setMessage("watch service close failed")
            .addKeyValue("error", e.toString())
            .log();
      }
    }
    if (watchThread != null) {
      watchThread.interrupt();
    }
  }
}
