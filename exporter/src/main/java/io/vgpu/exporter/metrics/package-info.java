/**
 * The collectors ({@link io.vgpu.exporter.metrics.Collectors#ALL}) with their per-collector success
 * and duration series, the label sets and the family builders; every cache belongs to the collector
 * that owns it.
 */
package io.vgpu.exporter.metrics;
