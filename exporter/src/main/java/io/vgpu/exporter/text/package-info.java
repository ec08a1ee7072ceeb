/**
 * Tenant-safe text and JSON: strings a tenant controls are escaped or bounded before they reach a
 * label, a page or a log line.
 */
package io.vgpu.exporter.text;
