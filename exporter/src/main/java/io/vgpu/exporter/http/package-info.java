/**
 * The HTTP server: {@code /metrics}, {@code /healthz}, {@code /readyz}, {@code /api/v1/containers},
 * the {@code /} status page and its model, TLS and basic auth from the web configuration file, and
 * the connection limits that hold before a client proves anything.
 */
package io.vgpu.exporter.http;
