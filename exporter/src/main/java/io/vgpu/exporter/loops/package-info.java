/**
 * Supervision of the background loops (discovery's rescan, the attribution pass): a pass that
 * throws is caught so the loop keeps running, and /readyz says why while the latest pass failed or
 * none finished in time.
 */
package io.vgpu.exporter.loops;
