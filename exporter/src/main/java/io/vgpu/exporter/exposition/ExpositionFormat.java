package io.vgpu.exporter.exposition;

import io.prometheus.metrics.expositionformats.OpenMetricsTextFormatWriter;
import io.prometheus.metrics.expositionformats.PrometheusTextFormatWriter;

/** The two text formats {@link TextEncoder} writes; content types are client_java's own. */
public enum ExpositionFormat {
  PROMETHEUS_TEXT(PrometheusTextFormatWriter.CONTENT_TYPE),
  OPENMETRICS(OpenMetricsTextFormatWriter.CONTENT_TYPE);

  private final String contentType;

  ExpositionFormat(String contentType) {
    this.contentType = contentType;
  }

  public String contentType() {
    return contentType;
  }
}
