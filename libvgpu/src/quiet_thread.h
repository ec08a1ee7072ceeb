/*
 * quiet_thread.h — how the library starts its background threads (heartbeat, SM-utilization
 * reporter): detached, a 64 KiB stack, named, and with every signal blocked while it is created so
 * that it inherits a full mask: the application's signals stay with the application's threads.
 * Header-only, so the standalone limiter units (built without the rest of the library by
 * gpu/limiter_trace) can use it too.
 */
#ifndef VGPU_QUIET_THREAD_H
#define VGPU_QUIET_THREAD_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>

static inline bool vgpu_start_quiet_thread(void *(*main_fn)(void *), void *arg, const char *name) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t t;
  bool started = pthread_create(&t, &attr, main_fn, arg) == 0;
  if (started) pthread_setname_np(t, name);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  return started;
}

#endif
