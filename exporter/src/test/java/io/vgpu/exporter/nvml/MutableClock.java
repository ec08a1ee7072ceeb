package io.vgpu.exporter.nvml;

import java.time.Duration;
import java.time.Instant;
import java.time.InstantSource;

/** A test clock moved by hand. */
public final class MutableClock implements InstantSource {
  private volatile Instant now;

  public MutableClock(Instant start) {
    this.now = start;
  }

  @Override
  public Instant instant() {
    return now;
  }

  public void advance(Duration d) {
    now = now.plus(d);
  }

  public long micros() {
    return now.getEpochSecond() * 1_000_000 + now.getNano() / 1000;
  }
}
