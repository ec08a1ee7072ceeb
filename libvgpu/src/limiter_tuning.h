/*
 * limiter_tuning.h — every tuning constant of the SM limiter, with the reason for its value.
 * The units that use them: limiter_measure.c (events, heartbeats, completions), limiter_bucket.c
 * (the shared budget and the trim), limiter.c (the launch gate and the public API).
 */
#ifndef VGPU_LIMITER_TUNING_H
#define VGPU_LIMITER_TUNING_H

/* ---- capacities: state stays bounded whatever the application does ---------------------- */

/* Bracketed launches in flight per process and device. At 3/4 full the gate polls at once, and a
 * full table charges a launch blind at its estimate, so an application that enqueues faster than
 * the GPU drains never grows the state. */
#define MAX_PEND 512
/* Contexts per device whose launches are bracketed by timing events (primary context plus a few
 * created ones). */
#define MAX_CTX 4
/* A context beyond them (issue 35, route 17: they were charged an estimate of 100 us per launch,
 * 99 % of the GPU) has its launches timed without timing events in one extra slot, ctx[OVERFLOW_CTX]
 * (limiter_crowd.c): [the launch call, the poll that saw its end], never less than it held. */
#define OVERFLOW_CTX MAX_CTX
/* Streams per context tracked for estimates and FIFO order; the least recently used idle stream
 * is recycled. Sized for the multi-stream applications issue 35 names (NCCL channels, inference
 * servers); with 32, 96 of 128 busy streams had no slot and were charged an estimate per launch,
 * 6x what they held. */
#define MAX_STREAMS 256
/* Beyond them (only a crowded context can have more busy streams), launches are timed without
 * timing events in one extra queue polled in launch order (limiter_crowd.c): a launch is then
 * seen done no earlier than those launched before it, charged longer, never less. */
#define OVERFLOW_SQ MAX_STREAMS
/* Words of the per-context bitmap of slots with launches in flight (MAX_STREAMS + 1 slots). */
#define SQ_WORDS ((MAX_STREAMS + 1 + 63) / 64)
/* Buckets of the per-context stream -> slot index (a power of two, twice the slots). */
#define SIDX_N 512
/* Reference events alive per context: the current one plus those older launches still map to. */
#define MAX_REFS 4
/* Heartbeats pending per context: at one per HB_PERIOD_NS, 64 cover 6.4 ms of another context's
 * time slice (real slices are 1–2 ms; queued heartbeats complete together and merge). */
#define MAX_HB 64
/* Remembered off-GPU stretches per context. A launch's interval can only be discounted by the
 * stretches still remembered when it completes, and time-sliced contexts alternate every slice:
 * a 1 s kernel sharing the GPU with three other containers spans ~4 s of wall time and ~500
 * stretches. 4096 cover 16 s of 2 ms slices (kept on the heap, looked up by binary search). */
#define MAX_FOREIGN 4096
/* Time-line samples kept per reference event (sliding-window maximum of lower bounds)... */
#define LB_WINDOW_N 128
/* ...from the last 50 ms: local enough in time that a GPU timer drifting by hundreds of ppm
 * against CLOCK_MONOTONIC moves the map by microseconds. */
#define LB_WINDOW_NS 50000000LL

/* ---- the budget (GCRA bucket) ----------------------------------------------------------- */

/* Wall-time credit a container may run ahead of its entitlement. Big enough that admitted work
 * runs back to back (a duty cycle of whole bursts, not a launch-by-launch trickle), small enough
 * that the share holds over 100 ms. */
#define BURST_NS 10000000LL
/* A charge never starts earlier than its launch's start minus this (anti-windup: idle time earns
 * no credit), with room for a sleep's overshoot. */
#define SLACK_NS 500000LL
/* Bound on the bucket's debt, and the sanity bound beyond which the shared word reads as garbage
 * ("now"). A legitimate debt is one burst plus the longest kernel divided by the limit: a 5 s
 * kernel at 10 % owes 45 s, at 1 % almost 500 s. An hour covers 36 s kernels at 1 %; a bound that
 * short forgave the rest of the debt (10 s made 2 s kernels at 10 % run at 16.7 % and 5 s ones at
 * 33 %). A debt is only ever moved forward by the CAS in bucket_charge, so another process's
 * write never erases it. */
#define TAT_MAX_AHEAD_NS 3600000000000LL
/* A launch that has been on the GPU this long (two trim windows; another context's known time
 * slices in between do not count) is charged as it runs, at every poll,
 * not only when it ends: a persistent kernel that never returns (issue 35, route 20) was never
 * charged and took 94 % of the GPU under a 25 % limit. Its charge pushes the container's budget
 * ahead, so further launches of every context of the container wait (the gate), and
 * vgpu_limiter_stats reports it (long_running). Seconds-long kernels are charged the same in
 * total, only earlier. */
#define LONG_RUN_NS 2000000000LL
/* Cost of a launch before anything was measured (the stream then keeps one launch in flight). */
#define DEFAULT_EST_NS 100000LL
/* A running launch this far past twice its estimate means the estimate is wrong: its stream gets
 * no more launches until it completes (an asynchronous queue cannot run ahead of the budget). */
#define OVERDUE_NS 2000000LL

/* ---- the gate's waits --------------------------------------------------------------------- */

/* While held back with nothing in flight, wake at least every 1 ms (limit changes apply fast). */
#define SLEEP_CHUNK_NS 1000000LL
/* HAMi's monitor set recent_kernel < 0 (a higher-priority container is active): re-check every
 * 100 ms, like HAMi-core's 1 s but faster to resume. */
#define PRIORITY_POLL_NS 100000000LL
/* Poll completions at most every 100 µs on the launch path (one event query per stream head). */
#define POLL_EVERY_NS 100000LL
/* launches_total is published to the region in batches (one atomic add per 256 launches). */
#define FLUSH_EVERY 256

/* ---- residency heartbeats (other contexts' time slices are not charged) ------------------- */

/* Heartbeat period while work is in flight and the launch waits: the start of another context's
 * slice is known to within this (estimated as the middle). */
#define HB_PERIOD_NS 100000LL
/* ...and at most this often right after launches (a launch's stretch behind another context's
 * slice is seen even when the gate never waits). */
#define HB_AFTER_LAUNCH_NS 20000LL
/* A heartbeat this late means the context was off the GPU: above a record round trip (~10 µs) and
 * below the cheapest switch worth charging (switches of 50 µs must be seen); far below a time
 * slice (1–2 ms). A false detection costs nothing: the stretch is not charged, the switch charge
 * for it is at most its length. */
#define HB_GAP_NS 25000LL

/* ---- context switches between time-sliced contexts (charged, not forgiven) --------------- */

/* What one switch onto a context costs (saving the context that held the GPU, restoring this
 * one) is measured per device (limiter_switch.c) wherever this process sees both sides of a
 * switch: the gap between the end of its work on one context and the start of its queued work on
 * another. The estimate is a low quantile of the recent samples, so it follows a change of card,
 * driver or kernel mix within SWITCH_SAMPLE_TTL_NS. */
#define SWITCH_SAMPLES 32
/* The quantile taken: a quarter (robust against a gap that also held another container's work). */
#define SWITCH_QUANTILE_NUM 1
#define SWITCH_QUANTILE_DEN 4
/* Samples older than this are forgotten (the tenant mix or the card changed). */
#define SWITCH_SAMPLE_TTL_NS 10000000000LL
/* A gap longer than this is not one switch (another container held the GPU meanwhile): dropped.
 * Far above any measured save + restore. */
#define SWITCH_SAMPLE_MAX_NS 5000000LL
/* NOT MEASURED: the charge per switch while no sample exists, i.e. always for a process with one
 * context per device (it never sees both sides of a switch). 150 us reproduces what two
 * time-sliced contexts lose on an H100 (two unlimited processes finish 90.5-91.3 % of one
 * process's work with the device 100 % busy at ~1 ms slices; README "SM limiter"). This is the
 * per-card constant issue 30 wants gone for containers of one context each; it is not gone yet. */
#define SWITCH_FALLBACK_NS 150000LL

/* ---- many busy streams (issue 35) -------------------------------------------------------- */

/* The driver maps streams onto CUDA_DEVICE_MAX_CONNECTIONS hardware queues (default 8, at most
 * 32), round-robin, and a timing event blocks its queue until everything queued before it in
 * that queue has run (the false dependencies of shared queues: kernels bracketed by timing events
 * run only as many at once as there are queues). While a context has more busy streams than
 * queues (one is the internal stream's), its launches are timed without timing events
 * (limiter_measure.c "Crowded contexts"). */
#define HW_QUEUES_DEFAULT 8
/* A stream launched on this recently counts as busy although its queue just drained: a context
 * held back by its limit drains all its streams at every wait, and must not fall back to timing
 * events (and per-launch estimates) for the first streams of every burst. */
#define CROWD_WINDOW_NS 100000000LL
/* Device time a crowded process may run per burst, at any limit. Every burst starts with the
 * streams filling up one launch at a time and ends with them draining: time charged at part
 * concurrency, and after the drain the application refills its streams several launches at a
 * time (behind each other in the shared hardware queues: the queue's streams run one after
 * another until their phases even out). BURST_NS of wall-time credit gives a burst of BURST_NS x
 * limit (2.5 ms at 25 %), too short to hide that. 20 ms bursts (4-5 pauses a second at 90 %) left
 * 33 host-bound streams at 78.5 % and 128 at 70.9 % of their unlimited work on
 * limiter_streams_test's 8-queue GPU; 35 ms (3 pauses a second of ~35 ms at 90 %, 140 ms of
 * credit at 25 %): 89.3 / 83.3 %; 50 ms: 88.5 / 84.4 %, but a burst is also what a process may
 * run past its share inside a short window (50 ms in 2 s is 2.5 pp: sm_throttle streams' 2 pp
 * bound failed once), so 35 ms (1.75 pp in 2 s, 1.2 in the bench's 3 s). */
#define CROWD_BURST_NS 35000000LL
#define HW_QUEUES_MAX 32
/* Streams idle past CROWD_WINDOW_NS stop counting as busy at most this late (a sweep of the
 * table, not a scan per launch). */
#define CROWD_SWEEP_NS 10000000LL
/* A poll stops after this many events found still running (the next one goes on from there):
 * 128 busy streams would otherwise cost 128 queries (~0.5-1 us each on a GPU) every
 * POLL_EVERY_NS, more host time than the launches themselves. A finished event costs no budget,
 * and once at most twice this many streams have work each is queried at every poll
 * (limiter_measure.c), so the end of a busy stretch is seen within a poll period. */
#define CROWD_POLL_QUERIES 4
/* A crowded stream records at most one untimed E per this long while the process is busy
 * (limiter_crowd.c lim_crowd_cover_due): 33 busy streams at ~170 000 launches/s then record
 * ~0.04 E per launch instead of 0.6 (with the bound below). Uncovered launches hold the commit
 * frontier: charges trail by up to this, below a crowded burst (CROWD_BURST_NS). */
#define CROWD_COVER_NS 2000000LL
/* ...and at most one per this long x the busy streams (128 streams: one per 19 ms each). */
#define CROWD_COVER_PER_STREAM_NS 150000LL
/* While the gate waits (the streams drain), an untimed E is queried at least this often: its due
 * time follows the per-launch estimate, which shared hardware queues inflate (a stream's kernel
 * waits for the queue's others), and an end seen late is charged and keeps the gate shut
 * (limiter_streams_test, 128 streams on 8 queues: 86 % busy, 90 % charged at a 90 % limit). */
#define CROWD_DRAIN_QUERY_NS 300000LL

/* ---- the GPU -> host time map ------------------------------------------------------------- */

/* Start a new reference event every second: a drifting GPU timer never accumulates error. */
#define CALIB_EVERY_NS 1000000000LL
#define CALIB_RETRY_NS 50000000LL

/* ---- the integral trim (residual bias of short launches: events' own cost, estimates) ------ */

/* Trim / published-share window. */
#define WINDOW_NS 1000000000LL
/* A window integrates only with this many measured launches in it: a window holding one or two
 * seconds-long kernels reads 0 % or twice the limit and would swing the trim to its bounds (5 s
 * kernels at 90 % ran at 83.6 %). */
#define WINDOW_MIN_COMMITS 16
/* The published share is refreshed at least this often even with few launches. */
#define WINDOW_MAX_NS 10000000000LL
/* Integral gain per second of window on the relative error (a 10 % bias is gone in ~3 s), and a
 * small proportional term. The trim is bounded by VGPU_LIMITER_TRIM_MAX (limiter.h). */
#define TRIM_KI 0.3
#define TRIM_KP 0.05

/* ---- sm_util for HAMi's monitor (same scale and refresh as HAMi-core's watcher) ----------- */

/* HAMi-core's watcher rewrites every slot's sm_util every 120 ms from NVML's per-process
 * utilization over the last second; ours: the busy time the limiter charged to this process over
 * the last ~1 s (UTIL_RING_N snapshots UTIL_REFRESH_NS apart), in percent. */
#define UTIL_REFRESH_NS 120000000LL
#define UTIL_RING_N 9

#endif /* VGPU_LIMITER_TUNING_H */
