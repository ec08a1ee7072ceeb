package io.vgpu.exporter.exposition;

import io.prometheus.metrics.model.snapshots.Labels;
import io.prometheus.metrics.model.snapshots.MetricMetadata;
import io.prometheus.metrics.model.snapshots.MetricSnapshot;
import io.prometheus.metrics.model.snapshots.MetricSnapshots;
import io.prometheus.metrics.model.snapshots.Unit;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

/**
 * Writes client_java snapshots as Prometheus text 0.0.4 or OpenMetrics 1.0.0, byte for byte what
 * client_java's own writers produce (tests compare the two on generated and real snapshots), for
 * the subset this exporter emits: gauges, counters and info families with legacy-valid names, no
 * exemplars, no created or scrape timestamps. Anything else throws {@link
 * UnsupportedFamilyException}, and the caller uses client_java's writer instead.
 *
 * <p>Why it exists: client_java writes each label value character by character through a
 * BufferedWriter and formats every value with Double.toString; on a node of 100 containers x 8
 * devices (16 000 series, 3.3 MB) that alone took 12-15 ms per scrape. Here each distinct label set
 * is encoded once and then copied: the exporter's label sets are cached objects that repeat from
 * scrape to scrape ({@code LabelSets}), so they are keyed by identity.
 *
 * <p>Not thread-safe: one encoder per render at a time ({@link ExpositionCache} serializes).
 */
public final class TextEncoder {
  private static final byte[] HELP = ascii("# HELP ");
  private static final byte[] TYPE = ascii("# TYPE ");
  private static final byte[] UNIT = ascii("# UNIT ");
  private static final byte[] EOF = ascii("# EOF\n");
  private static final byte[] TOTAL = ascii("_total");
  private static final byte[] INFO = ascii("_info");

  /** An encoded label block ({@code {a="x",b="y"}}, or nothing for no labels) and its last use. */
  private static final class Block {
    final byte[] bytes;
    final boolean cached; // false: past the cache's budget, encoded for one point
    long lastUsed;

    Block(byte[] bytes, boolean cached) {
      this.bytes = bytes;
      this.cached = cached;
    }
  }

  private final IdentityHashMap<Labels, Block> blocks = new IdentityHashMap<>();

  /**
   * Each family's label sets and blocks by position, as of the last render: a family's points come
   * in the same order scrape after scrape, so most points find their block at their own index by
   * one identity check instead of a hash lookup. Holds only blocks that are also in {@link
   * #blocks}; keyed by family name, dropped for a family not rendered.
   */
  private static final class Positions {
    Labels[] labels = new Labels[0];
    Block[] blocks = new Block[0];
    long lastUsed;

    /**
     * The family as last deflated on its own (null when it was not, or written since without being
     * captured): exactly the bytes of the labels above, the value bits below, this format, kind,
     * help and unit.
     */
    PageCompressor.Segment segment;

    long[] values = new long[0]; // raw bits of the points' values, kept with the segment
    ExpositionFormat format;
    Family.Kind kind;
    String help;
    Unit unit;
  }

  private final Map<String, Positions> positions = new HashMap<>();

  /**
   * Encoded label blocks kept at most (bytes): 8 MiB, and no more than a sixteenth of the heap. A
   * 200-container node needs ~3 MB; a node of 10 000 directories would otherwise keep most of its
   * page on the heap between scrapes. Under the launcher's 48 MiB heap a fixed 8 MiB, with the
   * label sets and node state of 2 000 region containers beside it, left no room for one more
   * render (the process ended on OutOfMemoryError: BoundedCostTest). Label sets past the budget are
   * encoded per render (same bytes, more CPU).
   */
  static final long MAX_CACHED_LABEL_BYTES =
      Math.min(8L << 20, Runtime.getRuntime().maxMemory() / 16);

  private long cachedLabelBytes;
  private long render;
  private int liveBlocks; // cached label sets used by the current render
  private final ExpositionBuffer scratch = new ExpositionBuffer(256);
  private final DoubleText.Fractions fractions = new DoubleText.Fractions();

  /**
   * Writes {@code snapshots} to {@code out} in {@code format}, checking as it goes that each is one
   * this encoder writes exactly as client_java would; anything else throws {@link
   * UnsupportedFamilyException} with {@code out} partly written (the caller discards it and uses
   * client_java's writer).
   */
  public void encode(MetricSnapshots snapshots, ExpositionFormat format, ExpositionBuffer out)
      throws UnsupportedFamilyException {
    List<Family> families = new ArrayList<>(snapshots.size());
    for (MetricSnapshot s : snapshots) {
      families.add(Family.of(s));
    }
    encode(families, format, out);
  }

  /**
   * Writes {@code families} (in exposition order, points in label order) to {@code out} in {@code
   * format}; a name client_java would quote or escape throws {@link UnsupportedFamilyException}
   * with {@code out} partly written.
   */
  public void encode(List<? extends Family> families, ExpositionFormat format, ExpositionBuffer out)
      throws UnsupportedFamilyException {
    encode(families, format, out, null);
  }

  /**
   * Families of at least this many points are deflated as segments of their own when encoding into
   * a {@link PageCompressor}: smaller ones cost more in a flush and a lost history than they save.
   */
  static final int MIN_SEGMENT_POINTS = 32;

  /**
   * As {@link #encode(List, ExpositionFormat, ExpositionBuffer)}, into {@code out} streaming to
   * {@code segments}: each family of at least {@link #MIN_SEGMENT_POINTS} points is deflated as a
   * {@linkplain PageCompressor.Segment segment} of its own, and one whose every point has the same
   * label set object and value bits as when its segment was made is not encoded again: its segment
   * is replayed. {@code segments} null: no segments.
   */
  @SuppressWarnings("ReferenceEquality") // blocks are reused for the very same Labels object
  void encode(
      List<? extends Family> families,
      ExpositionFormat format,
      ExpositionBuffer out,
      PageCompressor segments)
      throws UnsupportedFamilyException {
    if (segments != null && !out.streamsTo(segments)) {
      throw new IllegalArgumentException("segments need a buffer streaming to their compressor");
    }
    render++;
    liveBlocks = 0;
    boolean om = format == ExpositionFormat.OPENMETRICS;
    Set<String> names = new HashSet<>();
    for (Family f : families) {
      MetricMetadata meta = f.metadata();
      String name = meta.getName();
      if (!isLegacyName(name, false)) {
        throw new UnsupportedFamilyException("metric name " + name);
      }
      if (!names.add(name)) {
        throw new UnsupportedFamilyException("duplicate family " + name);
      }
      int n = f.size();
      if (n == 0) {
        continue;
      }
      byte[] prefix;
      switch (f.kind()) {
        case GAUGE -> {
          metadata(out, om, name, null, "gauge", meta);
          prefix = ascii(name);
        }
        case COUNTER -> {
          metadata(out, om, name, om ? null : TOTAL, "counter", meta);
          prefix = ascii(name + "_total");
        }
        case INFO -> {
          metadata(out, om, name, om ? null : INFO, om ? "info" : "gauge", meta);
          prefix = ascii(name + "_info");
        }
        default -> throw new UnsupportedFamilyException("kind " + f.kind());
      }
      boolean info = f.kind() == Family.Kind.INFO;
      Positions at = positions(name, n);
      boolean segment = segments != null && n >= MIN_SEGMENT_POINTS;
      if (segment && unchanged(f, n, at, format, meta)) {
        out.drainToSink();
        segments.replay(at.segment);
        continue;
      }
      at.segment = null;
      if (segment) {
        out.drainToSink();
        segments.beginSegment();
      }
      Labels[] atLabels = at.labels;
      Block[] atBlocks = at.blocks;
      long[] atValues = at.values;
      for (int i = 0; i < n; i++) {
        Labels labels = f.labels(i);
        byte[] block;
        Block b = atBlocks[i];
        if (b != null && atLabels[i] == labels) {
          if (b.lastUsed != render) {
            b.lastUsed = render;
            liveBlocks++;
          }
          block = b.bytes;
        } else {
          b = block(labels);
          atLabels[i] = b.cached ? labels : null;
          atBlocks[i] = b.cached ? b : null;
          block = b.bytes;
        }
        out.writeSampleStart(prefix, block);
        if (info) {
          out.write((byte) '1');
        } else {
          double v = f.value(i);
          atValues[i] = Double.doubleToRawLongBits(v);
          DoubleText.write(out, v, fractions);
        }
        out.write((byte) '\n');
      }
      if (segment) {
        out.drainToSink();
        at.segment = segments.endSegment();
        at.format = format;
        at.kind = f.kind();
        at.help = meta.getHelp();
        at.unit = meta.getUnit();
      }
    }
    if (om) {
      out.write(EOF);
    }
    evictUnused();
  }

  /**
   * True when family {@code f} would be written exactly as its kept segment: same format, kind,
   * help and unit, and every point's label set the very object at its index with the same value
   * bits (the same bits print the same text). Marks the blocks it checks as used by this render.
   */
  @SuppressWarnings("ReferenceEquality") // blocks are reused for the very same Labels object
  private boolean unchanged(
      Family f, int n, Positions at, ExpositionFormat format, MetricMetadata meta) {
    if (at.segment == null
        || at.format != format
        || at.kind != f.kind()
        || !Objects.equals(at.help, meta.getHelp())
        || !Objects.equals(at.unit, meta.getUnit())) {
      return false;
    }
    boolean info = f.kind() == Family.Kind.INFO;
    Labels[] labels = at.labels;
    Block[] blocks = at.blocks;
    long[] values = at.values;
    for (int i = 0; i < n; i++) {
      Block b = blocks[i];
      if (b == null
          || labels[i] != f.labels(i)
          || (!info && values[i] != Double.doubleToRawLongBits(f.value(i)))) {
        return false;
      }
      if (b.lastUsed != render) {
        b.lastUsed = render;
        liveBlocks++;
      }
    }
    return true;
  }

  /** The positions of family {@code name}, sized for {@code n} points (cleared when resized). */
  private Positions positions(String name, int n) {
    Positions p = positions.computeIfAbsent(name, k -> new Positions());
    if (p.labels.length != n) {
      p.labels = new Labels[n];
      p.blocks = new Block[n];
      p.values = new long[n];
      p.segment = null;
    }
    p.lastUsed = render;
    return p;
  }

  /**
   * Label sets not seen in the last render are dropped once they outnumber the live ones. The live
   * ones are counted as they are used, so a render that evicts nothing does not walk the cache.
   */
  private void evictUnused() {
    positions.values().removeIf(p -> p.lastUsed != render);
    if (blocks.size() > 2 * liveBlocks + 64) {
      Iterator<Block> it = blocks.values().iterator();
      while (it.hasNext()) {
        Block b = it.next();
        if (b.lastUsed != render) {
          cachedLabelBytes -= b.bytes.length;
          it.remove();
        }
      }
    }
  }

  /** Label sets the encoder currently remembers (tests: the cache is bounded by the live ones). */
  int cachedLabelSets() {
    return blocks.size();
  }

  private void metadata(
      ExpositionBuffer out, boolean om, String name, byte[] suffix, String type, MetricMetadata m) {
    String help = m.getHelp();
    boolean hasHelp = help != null && !help.isEmpty();
    if (om) {
      out.write(TYPE);
      name(out, name, suffix);
      out.write((byte) ' ');
      out.writeAscii(type);
      out.write((byte) '\n');
      if (m.getUnit() != null) {
        out.write(UNIT);
        name(out, name, suffix);
        out.write((byte) ' ');
        escaped(out, m.getUnit().toString(), true);
        out.write((byte) '\n');
      }
      if (hasHelp) {
        out.write(HELP);
        name(out, name, suffix);
        out.write((byte) ' ');
        escaped(out, help, true);
        out.write((byte) '\n');
      }
    } else {
      if (hasHelp) {
        out.write(HELP);
        name(out, name, suffix);
        out.write((byte) ' ');
        escaped(out, help, false);
        out.write((byte) '\n');
      }
      out.write(TYPE);
      name(out, name, suffix);
      out.write((byte) ' ');
      out.writeAscii(type);
      out.write((byte) '\n');
    }
  }

  private static void name(ExpositionBuffer out, String name, byte[] suffix) {
    out.writeAscii(name);
    if (suffix != null) {
      out.write(suffix);
    }
  }

  /**
   * The cached block of {@code labels}, encoded and cached now if new; when the cache is full, one
   * encoded for this point only.
   */
  private Block block(Labels labels) throws UnsupportedFamilyException {
    Block b = blocks.get(labels);
    if (b == null) {
      byte[] encoded = encodeLabels(labels);
      if (cachedLabelBytes + encoded.length > MAX_CACHED_LABEL_BYTES) {
        return new Block(encoded, false);
      }
      b = new Block(encoded, true);
      blocks.put(labels, b);
      cachedLabelBytes += encoded.length;
    }
    if (b.lastUsed != render) {
      b.lastUsed = render;
      liveBlocks++;
    }
    return b;
  }

  private byte[] encodeLabels(Labels labels) throws UnsupportedFamilyException {
    if (labels.isEmpty()) {
      return new byte[0];
    }
    ExpositionBuffer o = scratch;
    o.reset();
    o.write((byte) '{');
    for (int i = 0; i < labels.size(); i++) {
      String n = labels.getName(i);
      if (!isLegacyName(n, true) || !n.equals(labels.getPrometheusName(i))) {
        throw new UnsupportedFamilyException("label name " + n);
      }
      if (i > 0) {
        o.write((byte) ',');
      }
      o.writeAscii(n);
      o.write((byte) '=');
      o.write((byte) '"');
      escaped(o, labels.getValue(i), true);
      o.write((byte) '"');
    }
    o.write((byte) '}');
    return o.toByteArray();
  }

  /**
   * UTF-8 with backslash and newline escaped, and double quotes too when {@code quotes} (label
   * values everywhere; OpenMetrics help and unit text). Unpaired surrogates become '?', as Java's
   * UTF-8 encoder writes them.
   */
  private static void escaped(ExpositionBuffer out, String s, boolean quotes) {
    int n = s.length();
    for (int i = 0; i < n; i++) {
      char c = s.charAt(i);
      if (c < 0x80) {
        if (c == '\\') {
          out.write((byte) '\\');
          out.write((byte) '\\');
        } else if (c == '\n') {
          out.write((byte) '\\');
          out.write((byte) 'n');
        } else if (c == '"' && quotes) {
          out.write((byte) '\\');
          out.write((byte) '"');
        } else {
          out.write((byte) c);
        }
      } else if (c < 0x800) {
        out.write((byte) (0xC0 | (c >> 6)));
        out.write((byte) (0x80 | (c & 0x3F)));
      } else if (Character.isHighSurrogate(c)
          && i + 1 < n
          && Character.isLowSurrogate(s.charAt(i + 1))) {
        int cp = Character.toCodePoint(c, s.charAt(++i));
        out.write((byte) (0xF0 | (cp >> 18)));
        out.write((byte) (0x80 | ((cp >> 12) & 0x3F)));
        out.write((byte) (0x80 | ((cp >> 6) & 0x3F)));
        out.write((byte) (0x80 | (cp & 0x3F)));
      } else if (Character.isSurrogate(c)) {
        out.write((byte) '?');
      } else {
        out.write((byte) (0xE0 | (c >> 12)));
        out.write((byte) (0x80 | ((c >> 6) & 0x3F)));
        out.write((byte) (0x80 | (c & 0x3F)));
      }
    }
  }

  /**
   * [a-zA-Z_:][a-zA-Z0-9_:]* for metric names, without ':' for label names; such names are written
   * unquoted and unescaped by every escaping scheme.
   */
  static boolean isLegacyName(String s, boolean label) {
    if (s.isEmpty()) {
      return false;
    }
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      boolean ok =
          (c >= 'a' && c <= 'z')
              || (c >= 'A' && c <= 'Z')
              || c == '_'
              || (c == ':' && !label)
              || (i > 0 && c >= '0' && c <= '9');
      if (!ok) {
        return false;
      }
    }
    return true;
  }

  private static byte[] ascii(String s) {
    return s.getBytes(StandardCharsets.US_ASCII);
  }
}
