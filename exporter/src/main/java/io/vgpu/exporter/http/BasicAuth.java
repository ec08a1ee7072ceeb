package io.vgpu.exporter.http;

import at.favre.lib.crypto.bcrypt.BCrypt;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.Base64;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Pattern;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * HTTP basic authentication against bcrypt hashes ({@code basic_auth_users}). bcrypt is slow on
 * purpose (2^cost rounds: ~60 ms at cost 10, ~1 s at 14), which makes three things matter here:
 *
 * <ul>
 *   <li><b>Same time for every user name.</b> Every check that hashes does the work of one hash at
 *       the highest configured cost, whoever it names: an unknown user is checked against a dummy
 *       hash of that cost, and a known user whose hash is cheaper is padded with dummy hashes of
 *       costs c, c+1, ..., max-1 (2^c + 2^c + ... + 2^(max-1) = 2^max rounds). So response time
 *       does not say which users exist, whatever costs the file mixes.
 *   <li><b>Bounded hashing.</b> At most {@link #CONCURRENT_HASHES} hash at a time (one core at
 *       most, whatever the flood), at most {@link #MAX_WAITING} more wait for it (up to {@link
 *       #MAX_WAIT}); any further check is answered {@link Outcome#BUSY} at once without hashing, so
 *       a wrong-password flood holds at most a few server threads and never the whole pool.
 *   <li><b>Known good credentials skip the hash.</b> A credential that verified is remembered, by
 *       its HMAC-SHA256 under a key drawn at start (never in clear, and not a digest that could be
 *       brute-forced faster than bcrypt without the process's key), {@link #MAX_REMEMBERED} at
 *       most, least recently used first out. Only successes are remembered, the users and hashes
 *       are fixed for the process's life, so a remembered credential is exactly one bcrypt would
 *       accept; a scraper that authenticated once is answered without hashing, even during a flood
 *       that keeps the hashing busy.
 * </ul>
 *
 * Thread-safe.
 */
final class BasicAuth {
  private static final Pattern BCRYPT = Pattern.compile("\\$2[aby]\\$\\d\\d\\$[./A-Za-z0-9]{53}");

  /** bcrypt's own lower bound. */
  static final int MIN_COST = 4;

  /**
   * The highest cost accepted at start: a check at 14 takes about a second of a core, and each step
   * doubles it (at 31, a day per check), so a higher cost is a denial of service on the exporter
   * rather than more safety.
   */
  static final int MAX_COST = 14;

  /** Hashes computed at once (each takes a core for its whole duration). */
  static final int CONCURRENT_HASHES = 1;

  /** Checks that may wait for the hashing; more are answered BUSY at once. */
  static final int MAX_WAITING = 2;

  /** How long a check waits for the hashing before it is answered BUSY. */
  static final Duration MAX_WAIT = Duration.ofSeconds(2);

  /** Remembered good credentials (users are few; an entry is 32 bytes). */
  static final int MAX_REMEMBERED = 64;

  /** What a check says. */
  enum Outcome {
    /** A configured user and its password. */
    ALLOWED,
    /** No credentials, malformed ones, an unknown user or a wrong password. */
    DENIED,
    /** Not checked: the hashing is saturated; the client should retry shortly (HTTP 429). */
    BUSY
  }

  @SuppressWarnings("ArrayRecordComponent") // never compared; the hash is checked in constant time
  private record User(byte[] hash, int cost) {}

  private final Map<String, User> users = new HashMap<>();
  private final int maxCost;

  /** A dummy hash (never matches) per cost from {@link #MIN_COST} to {@link #maxCost}. */
  private final byte[][] dummies;

  private final SecretKeySpec rememberKey;
  private final Map<String, Boolean> remembered =
      new LinkedHashMap<>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, Boolean> eldest) {
          return size() > MAX_REMEMBERED;
        }
      };
  private final Semaphore hashing = new Semaphore(CONCURRENT_HASHES, true);
  private final AtomicInteger admitted = new AtomicInteger();
  private final AtomicLong hashChecks = new AtomicLong();

  BasicAuth(Map<String, String> users) {
    int max = MIN_COST;
    for (Map.Entry<String, String> e : users.entrySet()) {
      if (!isBcryptHash(e.getValue())) {
        throw new IllegalArgumentException("user " + e.getKey() + ": not a bcrypt hash");
      }
      int cost = cost(e.getValue());
      if (cost < MIN_COST || cost > MAX_COST) {
        throw new IllegalArgumentException(
            "user " + e.getKey() + ": bcrypt cost " + cost + " is outside " + costRange());
      }
      max = Math.max(max, cost);
      this.users.put(e.getKey(), new User(e.getValue().getBytes(StandardCharsets.UTF_8), cost));
    }
    this.maxCost = max;
    SecureRandom random = new SecureRandom();
    // One real hash at the lowest cost (about a millisecond); its cost field rewritten gives a
    // well-formed hash of every cost that no password matches (bcrypt recomputes at the cost it
    // reads, so a dummy of cost c costs what a real one does).
    byte[] secret = new byte[32];
    random.nextBytes(secret);
    String base =
        new String(
            BCrypt.withDefaults()
                .hash(MIN_COST, Base64.getEncoder().encodeToString(secret).toCharArray()),
            StandardCharsets.UTF_8);
    this.dummies = new byte[max + 1][];
    for (int c = MIN_COST; c <= max; c++) {
      dummies[c] =
          (base.substring(0, 4) + "%02d".formatted(c) + base.substring(6))
              .getBytes(StandardCharsets.UTF_8);
    }
    byte[] key = new byte[32];
    random.nextBytes(key);
    this.rememberKey = new SecretKeySpec(key, "HmacSHA256");
  }

  static boolean isBcryptHash(String s) {
    return s != null && BCRYPT.matcher(s).matches();
  }

  /** The cost field of a hash {@link #isBcryptHash} accepts. */
  static int cost(String hash) {
    return Integer.parseInt(hash.substring(4, 6));
  }

  static String costRange() {
    return MIN_COST + ".." + MAX_COST;
  }

  /** Whether an {@code Authorization} header value carries a valid user and password. */
  Outcome check(String authorization) {
    if (authorization == null || !authorization.regionMatches(true, 0, "Basic ", 0, 6)) {
      return Outcome.DENIED;
    }
    byte[] decoded;
    try {
      decoded = Base64.getDecoder().decode(authorization.substring(6).trim());
    } catch (IllegalArgumentException e) {
      return Outcome.DENIED;
    }
    String credential = new String(decoded, StandardCharsets.UTF_8);
    int colon = credential.indexOf(':');
    if (colon < 0) {
      return Outcome.DENIED;
    }
    String key = hmac(decoded);
    synchronized (remembered) {
      if (remembered.get(key) != null) {
        return Outcome.ALLOWED;
      }
    }
    if (admitted.incrementAndGet() > CONCURRENT_HASHES + MAX_WAITING) {
      admitted.decrementAndGet();
      return Outcome.BUSY;
    }
    try {
      if (!hashing.tryAcquire(MAX_WAIT.toMillis(), TimeUnit.MILLISECONDS)) {
        return Outcome.BUSY;
      }
      boolean ok;
      try {
        ok =
            verify(
                credential.substring(0, colon),
                credential.substring(colon + 1).getBytes(StandardCharsets.UTF_8));
      } finally {
        hashing.release();
      }
      if (!ok) {
        return Outcome.DENIED;
      }
      synchronized (remembered) {
        remembered.put(key, Boolean.TRUE);
      }
      return Outcome.ALLOWED;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return Outcome.BUSY;
    } finally {
      admitted.decrementAndGet();
    }
  }

  /** Checks that reached the hashing (tests: remembered credentials skip it). */
  long hashChecks() {
    return hashChecks.get();
  }

  /** Checks hashing or waiting for it now (tests). */
  int admittedChecks() {
    return admitted.get();
  }

  /** One hash's work at {@link #maxCost}, whoever {@code user} is. */
  private boolean verify(String user, byte[] password) {
    hashChecks.incrementAndGet();
    User u = users.get(user);
    if (u == null) {
      matches(password, dummies[maxCost]);
      return false;
    }
    boolean ok = matches(password, u.hash());
    for (int c = u.cost(); c < maxCost; c++) {
      matches(password, dummies[c]);
    }
    return ok;
  }

  private static boolean matches(byte[] password, byte[] hash) {
    try {
      return BCrypt.verifyer().verify(password, hash).verified;
    } catch (IllegalArgumentException e) {
      // A password longer than bcrypt's 72 bytes: no hash accepts it, for any user alike.
      return false;
    }
  }

  private String hmac(byte[] credential) {
    try {
      Mac mac = Mac.getInstance("HmacSHA256");
      mac.init(rememberKey);
      return Base64.getEncoder().encodeToString(mac.doFinal(credential));
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("HmacSHA256 is required of every JDK", e);
    }
  }
}
