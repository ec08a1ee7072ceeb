/*
 * robust_probe.c — does this (emulated) system recover a robust process-shared mutex whose owner
 * died? A child locks it and exits; the parent must get EOWNERDEAD within 2 s. Exit 0: yes;
 * 1: no (qemu-user does not emulate the kernel's robust futex list: the lock stays held for good).
 * test/arm64/run.sh runs it under qemu and, on 1, leaves out the cases that SIGKILL a holder of
 * libvgpu's reservation mutex (they would wait forever), saying so.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(void) {
  pthread_mutex_t *m =
      mmap(NULL, sizeof *m, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return 2;
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
  int rc = pthread_mutex_init(m, &a);
  if (rc != 0) {
    printf("robust mutex: init refused (%s)\n", strerror(rc));
    return 1;
  }
  pid_t pid = fork();
  if (pid == 0) {
    pthread_mutex_lock(m);
    _exit(0);
  }
  if (pid < 0 || waitpid(pid, NULL, 0) != pid) return 2;
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 2;
  rc = pthread_mutex_timedlock(m, &deadline);
  printf("robust mutex: after its owner died, timedlock says %s\n", strerror(rc));
  return rc == EOWNERDEAD ? 0 : 1;
}
