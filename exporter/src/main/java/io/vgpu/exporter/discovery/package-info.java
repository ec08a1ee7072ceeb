/**
 * Cache-root discovery: the bounded listing of {@code <podUID>_<container>/*.cache} files (opened
 * without following links, at most a fixed number of files per directory) and the mapped regions it
 * keeps open between scrapes.
 */
package io.vgpu.exporter.discovery;
