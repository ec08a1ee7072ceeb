package io.vgpu.exporter.http;

import at.favre.lib.crypto.bcrypt.BCrypt;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Base64;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Pattern;

/**
 * HTTP basic authentication against bcrypt hashes ({@code basic_auth_users}). bcrypt is slow on
 * purpose (tens of ms per check at cost 10), so: a credential that verified once is remembered (by
 * its SHA-256, never in clear) and a Prometheus scrape every 15 s costs a hash lookup; checks are
 * serialized, so wrong passwords can keep at most one core busy; and an unknown user is checked
 * against a dummy hash, so timing does not tell which users exist. Thread-safe.
 */
final class BasicAuth {
  private static final Pattern BCRYPT = Pattern.compile("\\$2[aby]\\$\\d\\d\\$[./A-Za-z0-9]{53}");

  /** Remembered good credentials; cleared when full (users are few, entries are 32 bytes). */
  static final int MAX_REMEMBERED = 256;

  private final Map<String, byte[]> users;
  private final byte[] dummyHash;
  private final Map<String, Boolean> verified = new ConcurrentHashMap<>();
  private final Object bcryptLock = new Object();

  BasicAuth(Map<String, String> users) {
    this.users = new java.util.HashMap<>();
    users.forEach((u, h) -> this.users.put(u, h.getBytes(StandardCharsets.UTF_8)));
    this.dummyHash =
        BCrypt.withDefaults().hash(10, "no such user".toCharArray()); // same cost as typical hashes
  }

  static boolean isBcryptHash(String s) {
    return s != null && BCRYPT.matcher(s).matches();
  }

  /** Whether an {@code Authorization} header value carries a valid user and password. */
  boolean allows(String authorization) {
    if (authorization == null || !authorization.regionMatches(true, 0, "Basic ", 0, 6)) {
      return false;
    }
    String decoded;
    try {
      decoded =
          new String(
              Base64.getDecoder().decode(authorization.substring(6).trim()),
              StandardCharsets.UTF_8);
    } catch (IllegalArgumentException e) {
      return false;
    }
    int colon = decoded.indexOf(':');
    if (colon < 0) {
      return false;
    }
    String user = decoded.substring(0, colon);
    String password = decoded.substring(colon + 1);
    String key = sha256(decoded);
    if (verified.containsKey(key)) {
      return true;
    }
    byte[] hash = users.get(user);
    boolean ok;
    synchronized (bcryptLock) {
      try {
        ok =
            BCrypt.verifyer()
                    .verify(
                        password.getBytes(StandardCharsets.UTF_8),
                        Objects.requireNonNullElse(hash, dummyHash))
                    .verified
                && hash != null;
      } catch (IllegalArgumentException e) {
        ok = false; // e.g. a password longer than bcrypt's 72 bytes
      }
    }
    if (ok) {
      if (verified.size() >= MAX_REMEMBERED) {
        verified.clear();
      }
      verified.put(key, Boolean.TRUE);
    }
    return ok;
  }

  private static String sha256(String s) {
    try {
      byte[] d = MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8));
      return Base64.getEncoder().encodeToString(d);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 is required of every JDK", e);
    }
  }
}
