package io.vgpu.exporter.config;

import java.util.List;

/** The HTTP surface: port and paths. The Helm chart tests read these, not copies. */
public final class Endpoints {
  /** HAMi's vGPU monitor port, so the exporter drops in behind the same Service. */
  public static final int DEFAULT_PORT = 9394;

  public static final String LANDING = "/";
  public static final String METRICS = "/metrics";
  public static final String HEALTHZ = "/healthz";
  public static final String READYZ = "/readyz";
  public static final String CONTAINERS_API = "/api/v1/containers";

  /** Every path the server answers, in the order the landing page lists them. */
  public static final List<String> ALL = List.of(LANDING, METRICS, HEALTHZ, READYZ, CONTAINERS_API);

  private Endpoints() {}
}
