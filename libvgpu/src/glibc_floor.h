/*
 * glibc_floor.h — force-included (gcc -include) into every translation unit of libvgpu.so so
 * that it needs nothing newer than GLIBC_2.17 on x86_64 and on aarch64 (where 2.17 is the first
 * glibc: every symbol's oldest version there is GLIBC_2.17), whatever glibc the build host has.
 * (shrreg-tool is linked statically instead: a static binary carries its libc and has no symbol
 * versions to pin.) Tenant images are often older than the build host (CentOS 7: 2.17, UBI 8:
 * 2.28, Ubuntu 20.04: 2.31); a preload that needs a newer glibc is skipped by the loader and the
 * container runs without limits.
 *
 * How: glibc keeps every old version of a symbol it ever exported, so binding a reference to the
 * old version (".symver name,name@GLIBC_x") runs on old and new glibc alike. Since 2.34 the
 * libpthread and libdl functions live in libc.so.6 under a new version; their old versions were
 * the libpthread.so.0/libdl.so.2 ones, so the Makefile also links those two libraries by soname
 * (on an old glibc the old versions are found there; on a new one they are empty stubs).
 * fstat/stat/lstat became real functions only in 2.33; before that the headers turned them into
 * __fxstat/__xstat/__lxstat calls with a struct stat version (_STAT_VER: 1 on x86_64, 0 on
 * aarch64, glibc's _STAT_VER_KERNEL there), which every glibc still exports. Anything not listed
 * here that needs a newer version fails the
 * `check-glibc-floor` test (test/check_glibc_floor.sh), which `make test` runs.
 */
#ifndef VGPU_GLIBC_FLOOR_H
#define VGPU_GLIBC_FLOOR_H

#include <features.h>

#if defined(__GLIBC__) && !defined(VGPU_NO_GLIBC_FLOOR)
/* The oldest version of each pinned symbol, per architecture. */
#if defined(__x86_64__)
#define VGPU_FLOOR_BASE GLIBC_2.2.5 /* every libdl/libpthread function below, unless named */
#define VGPU_FLOOR_2_3_3 GLIBC_2.3.3
#define VGPU_FLOOR_2_12 GLIBC_2.12
#define VGPU_FLOOR_STAT_VER 1
#elif defined(__aarch64__)
#define VGPU_FLOOR_BASE GLIBC_2.17
#define VGPU_FLOOR_2_3_3 GLIBC_2.17
#define VGPU_FLOOR_2_12 GLIBC_2.17
#define VGPU_FLOOR_STAT_VER 0
#endif
#endif

#ifdef VGPU_FLOOR_BASE

/* glibc >= 2.38 redirects strtol/strtoul/sscanf... to __isoc23_* (GLIBC_2.38) under _GNU_SOURCE;
 * the C23 binary-literal parsing they add is not wanted here, the old entry points are. */
#ifdef __GLIBC_USE_C2X_STRTOL
#undef __GLIBC_USE_C2X_STRTOL
#define __GLIBC_USE_C2X_STRTOL 0
#endif
#ifdef __GLIBC_USE_C23_STRTOL
#undef __GLIBC_USE_C23_STRTOL
#define __GLIBC_USE_C23_STRTOL 0
#endif

#define VGPU_FLOOR_PIN_STR(sym, ver) __asm__(".symver " #sym "," #sym "@" #ver)
#define VGPU_FLOOR_PIN(sym, ver) VGPU_FLOOR_PIN_STR(sym, ver) /* expands ver first */

/* libdl (moved into libc in 2.34). dlsym and dlvsym are not pinned: libvgpu defines its own
 * (interpose.c) and finds glibc's in libc's / libdl's symbol table (real.c). */
VGPU_FLOOR_PIN(dladdr, VGPU_FLOOR_BASE);
VGPU_FLOOR_PIN(dlclose, VGPU_FLOOR_BASE);
VGPU_FLOOR_PIN(dlerror, VGPU_FLOOR_BASE);
VGPU_FLOOR_PIN(dlopen, VGPU_FLOOR_BASE);
VGPU_FLOOR_PIN(dladdr1, VGPU_FLOOR_2_3_3);
/* libpthread (moved into libc in 2.34; pthread_sigmask got a new version in 2.32) */
VGPU_FLOOR_PIN(pthread_attr_setstacksize, VGPU_FLOOR_BASE);
VGPU_FLOOR_PIN(pthread_create, VGPU_FLOOR_BASE);
VGPU_FLOOR_PIN(pthread_detach, VGPU_FLOOR_BASE);
VGPU_FLOOR_PIN(pthread_getspecific, VGPU_FLOOR_BASE);
VGPU_FLOOR_PIN(pthread_join, VGPU_FLOOR_BASE);
VGPU_FLOOR_PIN(pthread_key_create, VGPU_FLOOR_BASE);
VGPU_FLOOR_PIN(pthread_key_delete, VGPU_FLOOR_BASE);
VGPU_FLOOR_PIN(pthread_kill, VGPU_FLOOR_BASE);
VGPU_FLOOR_PIN(pthread_mutex_consistent, VGPU_FLOOR_2_12);
VGPU_FLOOR_PIN(pthread_mutex_timedlock, VGPU_FLOOR_BASE);
VGPU_FLOOR_PIN(pthread_mutex_trylock, VGPU_FLOOR_BASE);
VGPU_FLOOR_PIN(pthread_mutexattr_destroy, VGPU_FLOOR_BASE);
VGPU_FLOOR_PIN(pthread_mutexattr_init, VGPU_FLOOR_BASE);
VGPU_FLOOR_PIN(pthread_mutexattr_setpshared, VGPU_FLOOR_BASE);
VGPU_FLOOR_PIN(pthread_mutexattr_setrobust, VGPU_FLOOR_2_12);
VGPU_FLOOR_PIN(pthread_mutexattr_settype, VGPU_FLOOR_BASE);
VGPU_FLOOR_PIN(pthread_once, VGPU_FLOOR_BASE);
VGPU_FLOOR_PIN(pthread_rwlock_rdlock, VGPU_FLOOR_BASE);
VGPU_FLOOR_PIN(pthread_rwlock_unlock, VGPU_FLOOR_BASE);
VGPU_FLOOR_PIN(pthread_rwlock_wrlock, VGPU_FLOOR_BASE);
VGPU_FLOOR_PIN(pthread_setname_np, VGPU_FLOOR_2_12);
VGPU_FLOOR_PIN(pthread_setspecific, VGPU_FLOOR_BASE);
VGPU_FLOOR_PIN(pthread_sigmask, VGPU_FLOOR_BASE);
VGPU_FLOOR_PIN(sem_destroy, VGPU_FLOOR_BASE);
VGPU_FLOOR_PIN(sem_getvalue, VGPU_FLOOR_BASE);
VGPU_FLOOR_PIN(sem_init, VGPU_FLOOR_BASE);
VGPU_FLOOR_PIN(sem_post, VGPU_FLOOR_BASE);
VGPU_FLOOR_PIN(sem_timedwait, VGPU_FLOOR_BASE);
VGPU_FLOOR_PIN(sem_trywait, VGPU_FLOOR_BASE);
VGPU_FLOOR_PIN(sem_wait, VGPU_FLOOR_BASE);

/* stat family: the pre-2.33 calling convention. */
#include <sys/stat.h>
extern int __fxstat(int vers, int fd, struct stat *buf);
extern int __xstat(int vers, const char *path, struct stat *buf);
extern int __lxstat(int vers, const char *path, struct stat *buf);
extern int __fxstatat(int vers, int dirfd, const char *path, struct stat *buf, int flags);
#define fstat(fd, buf) __fxstat(VGPU_FLOOR_STAT_VER, (fd), (buf))
#define stat(path, buf) __xstat(VGPU_FLOOR_STAT_VER, (path), (buf))
#define lstat(path, buf) __lxstat(VGPU_FLOOR_STAT_VER, (path), (buf))
#define fstatat(dirfd, path, buf, flags) __fxstatat(VGPU_FLOOR_STAT_VER, (dirfd), (path), (buf), (flags))

#endif
#endif /* VGPU_GLIBC_FLOOR_H */
