package io.vgpu.exporter;

/** Entry point of {@code bin/vgpu-exporter}. */
public final class Main {
  private Main() {}

  public static void main(String[] args) {
    System.out.println("vgpu-exporter");
  }
}
