package io.vgpu.exporter.testing;

import java.time.Duration;
import java.util.concurrent.Callable;

/** Polls a condition until it holds or a deadline passes (no awaitility on this build). */
public final class Await {
  private Await() {}

  public static void until(Duration timeout, Callable<Boolean> condition) {
    long deadline = System.nanoTime() + timeout.toNanos();
    Throwable last = null;
    while (System.nanoTime() < deadline) {
      try {
        if (Boolean.TRUE.equals(condition.call())) {
          return;
        }
      } catch (Exception e) {
        last = e;
      }
      try {
        Thread.sleep(20);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new AssertionError("interrupted", e);
      }
    }
    throw new AssertionError("condition not met within " + timeout, last);
  }
}
