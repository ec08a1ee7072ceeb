/**
 * App wiring: {@link io.vgpu.exporter.ExporterApp} constructs and starts every part (discovery,
 * NVML, pod metadata, the collectors, the HTTP server) and answers readiness; {@link
 * io.vgpu.exporter.Main} runs the CLI and exits with its code. Layers and what each may import:
 * docs/architecture.md.
 */
package io.vgpu.exporter;
