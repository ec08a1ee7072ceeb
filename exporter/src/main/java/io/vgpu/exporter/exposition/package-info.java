/**
 * The fenced exposition fast path: the Prometheus text encoder and the cache that serves one
 * rendered page to concurrent scrapes.
 */
package io.vgpu.exporter.exposition;
