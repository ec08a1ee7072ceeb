/**
 * Every flag in one place ({@link io.vgpu.exporter.config.Flags}), typed by its parser, and the
 * parsed {@link io.vgpu.exporter.config.ExporterConfig} the rest of the exporter reads.
 */
package io.vgpu.exporter.config;
