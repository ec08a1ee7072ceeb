/*
 * glibc_floor.h — force-included (gcc -include) into every translation unit of libvgpu.so so
 * that it needs nothing newer than GLIBC_2.17 on x86_64, whatever glibc the build host has.
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
 * __fxstat/__xstat/__lxstat calls (version 1 of struct stat, the kernel's on x86_64), which every
 * glibc still exports. Anything not listed here that needs a newer version fails the
 * `check-glibc-floor` test (test/check_glibc_floor.sh), which `make test` runs.
 */
#ifndef VGPU_GLIBC_FLOOR_H
#define VGPU_GLIBC_FLOOR_H

#include <features.h>

#if defined(__x86_64__) && defined(__GLIBC__) && !defined(VGPU_NO_GLIBC_FLOOR)

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

#define VGPU_FLOOR_PIN(sym, ver) __asm__(".symver " #sym "," #sym "@" #ver)

/* libdl (moved into libc in 2.34). dlsym and dlvsym are not pinned: libvgpu defines its own
 * (interpose.c) and finds glibc's in libc's / libdl's symbol table (real.c). */
VGPU_FLOOR_PIN(dladdr, GLIBC_2.2.5);
VGPU_FLOOR_PIN(dlclose, GLIBC_2.2.5);
VGPU_FLOOR_PIN(dlerror, GLIBC_2.2.5);
VGPU_FLOOR_PIN(dlopen, GLIBC_2.2.5);
VGPU_FLOOR_PIN(dladdr1, GLIBC_2.3.3);
/* libpthread (moved into libc in 2.34; pthread_sigmask got a new version in 2.32) */
VGPU_FLOOR_PIN(pthread_attr_setstacksize, GLIBC_2.2.5);
VGPU_FLOOR_PIN(pthread_create, GLIBC_2.2.5);
VGPU_FLOOR_PIN(pthread_detach, GLIBC_2.2.5);
VGPU_FLOOR_PIN(pthread_getspecific, GLIBC_2.2.5);
VGPU_FLOOR_PIN(pthread_join, GLIBC_2.2.5);
VGPU_FLOOR_PIN(pthread_key_create, GLIBC_2.2.5);
VGPU_FLOOR_PIN(pthread_key_delete, GLIBC_2.2.5);
VGPU_FLOOR_PIN(pthread_kill, GLIBC_2.2.5);
VGPU_FLOOR_PIN(pthread_mutex_consistent, GLIBC_2.12);
VGPU_FLOOR_PIN(pthread_mutex_timedlock, GLIBC_2.2.5);
VGPU_FLOOR_PIN(pthread_mutex_trylock, GLIBC_2.2.5);
VGPU_FLOOR_PIN(pthread_mutexattr_destroy, GLIBC_2.2.5);
VGPU_FLOOR_PIN(pthread_mutexattr_init, GLIBC_2.2.5);
VGPU_FLOOR_PIN(pthread_mutexattr_setpshared, GLIBC_2.2.5);
VGPU_FLOOR_PIN(pthread_mutexattr_setrobust, GLIBC_2.12);
VGPU_FLOOR_PIN(pthread_mutexattr_settype, GLIBC_2.2.5);
VGPU_FLOOR_PIN(pthread_once, GLIBC_2.2.5);
VGPU_FLOOR_PIN(pthread_rwlock_rdlock, GLIBC_2.2.5);
VGPU_FLOOR_PIN(pthread_rwlock_unlock, GLIBC_2.2.5);
VGPU_FLOOR_PIN(pthread_rwlock_wrlock, GLIBC_2.2.5);
VGPU_FLOOR_PIN(pthread_setname_np, GLIBC_2.12);
VGPU_FLOOR_PIN(pthread_setspecific, GLIBC_2.2.5);
VGPU_FLOOR_PIN(pthread_sigmask, GLIBC_2.2.5);
VGPU_FLOOR_PIN(sem_destroy, GLIBC_2.2.5);
VGPU_FLOOR_PIN(sem_getvalue, GLIBC_2.2.5);
VGPU_FLOOR_PIN(sem_init, GLIBC_2.2.5);
VGPU_FLOOR_PIN(sem_post, GLIBC_2.2.5);
VGPU_FLOOR_PIN(sem_timedwait, GLIBC_2.2.5);
VGPU_FLOOR_PIN(sem_trywait, GLIBC_2.2.5);
VGPU_FLOOR_PIN(sem_wait, GLIBC_2.2.5);

/* stat family: the pre-2.33 calling convention (struct stat version 1 on x86_64). */
#include <sys/stat.h>
extern int __fxstat(int vers, int fd, struct stat *buf);
extern int __xstat(int vers, const char *path, struct stat *buf);
extern int __lxstat(int vers, const char *path, struct stat *buf);
extern int __fxstatat(int vers, int dirfd, const char *path, struct stat *buf, int flags);
#define fstat(fd, buf) __fxstat(1, (fd), (buf))
#define stat(path, buf) __xstat(1, (path), (buf))
#define lstat(path, buf) __lxstat(1, (path), (buf))
#define fstatat(dirfd, path, buf, flags) __fxstatat(1, (dirfd), (path), (buf), (flags))

#endif
#endif /* VGPU_GLIBC_FLOOR_H */
