package io.vgpu.exporter.k8s;

import java.time.Instant;
import java.time.LocalDateTime;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeParseException;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import tools.jackson.core.JacksonException;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * Decodes HAMi's node annotations. Values come from other programs (and kubectl by hand), so every
 * decoder accepts the known spellings and returns empty for anything else.
 */
public final class NodeAnnotations {
  public static final String HANDSHAKE = "hami.io/node-handshake";
  public static final String NVIDIA_REGISTER = "hami.io/node-nvidia-register";
  public static final String MUTEX_LOCK = "hami.io/mutex.lock";

  private static final DateTimeFormatter HAMI_TIME =
      DateTimeFormatter.ofPattern("yyyy.MM.dd HH:mm:ss");
  private static final JsonMapper JSON = JsonMapper.builder().build();

  private NodeAnnotations() {}

  public static NodeMeta decode(Map<String, String> annotations) {
    String hs = annotations.get(HANDSHAKE);
    String reg = annotations.get(NVIDIA_REGISTER);
    return new NodeMeta(
        true,
        hs == null ? Optional.empty() : handshakeTime(hs),
        Optional.ofNullable(hs),
        reg == null ? OptionalInt.of(0) : registeredDevices(reg),
        annotations.containsKey(MUTEX_LOCK));
  }

  /**
   * The time in a handshake value: {@code Reported_2026.11.26 01:02:03} / {@code Requesting_...}
   * (HAMi's device plugin and scheduler, UTC), plain epoch seconds, or RFC 3339.
   */
  public static Optional<Instant> handshakeTime(String raw) {
    String v = raw.strip();
    int sep = v.indexOf('_');
    if (sep > 0) {
      v = v.substring(sep + 1);
    }
    if (v.matches("\\d{1,12}")) {
      return Optional.of(Instant.ofEpochSecond(Long.parseLong(v)));
    }
    try {
      return Optional.of(LocalDateTime.parse(v, HAMI_TIME).toInstant(ZoneOffset.UTC));
    } catch (DateTimeParseException e) {
      // fall through to RFC 3339
    }
    try {
      return Optional.of(OffsetDateTime.parse(v).toInstant());
    } catch (DateTimeParseException e) {
      return Optional.empty();
    }
  }

  /**
   * Device count in a registration value: a JSON array (newer HAMi) or colon-separated device
   * records of comma-separated fields (older HAMi). Empty when neither.
   */
  public static OptionalInt registeredDevices(String raw) {
    String v = raw.strip();
    if (v.isEmpty()) {
      return OptionalInt.of(0);
    }
    if (v.startsWith("[")) {
      try {
        JsonNode n = JSON.readTree(v);
        return n.isArray() ? OptionalInt.of(n.size()) : OptionalInt.empty();
      } catch (JacksonException e) {
        return OptionalInt.empty();
      }
    }
    int count = 0;
    for (String device : v.split(":", -1)) {
      if (device.isBlank()) {
        continue;
      }
      if (device.split(",").length < 3) {
        return OptionalInt.empty();
      }
      count++;
    }
    return OptionalInt.of(count);
  }
}
