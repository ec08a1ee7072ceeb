/**
 * The kubelet's pod-resources API over its unix socket: which devices each container was allocated,
 * asked with a deadline so a slow kubelet never holds a scrape.
 */
package io.vgpu.exporter.kubelet;
