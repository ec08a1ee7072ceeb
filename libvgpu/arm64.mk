# aarch64 (issue 33): the same artifacts cross-compiled for arm64 nodes, and their suites under
# qemu-user. Kept in this file (included at the top of the Makefile) so the x86 rules stay as they
# are. Debian's cross toolchain: gcc-aarch64-linux-gnu, libc6-dev-arm64-cross, qemu-user
# (scripts/install-deps.sh installs them).
#
#   make ARCH=arm64 all     libvgpu.so, libvgpu.a, shrreg-tool, the fake libcuda/libnvidia-ml and
#                           the test programs for aarch64, into build-arm64/ (build/ untouched)
#   make test-arm64         that build, then test/arm64/run.sh: the glibc floor (GLIBC_2.17) of
#                           the aarch64 artifacts, then the unit, preload, region, HAMi-coexistence,
#                           shrreg-tool and a reduced stress suite run on aarch64 under qemu-user
#   make test-arm64-quick   the set `make test` runs (ARM64_QUICK=1, see test/arm64/run.sh)
#   ARM64_SUITES="unit preload" make test-arm64   a subset (test/arm64/run.sh lists the names)
ARCH ?=
ifeq ($(ARCH),arm64)
CROSS ?= aarch64-linux-gnu-
CC := $(CROSS)gcc
AR := $(CROSS)ar
# Never build/ (an exported BUILD=build would otherwise mix aarch64 objects into the x86 build).
ifneq ($(origin BUILD),command line)
BUILD := build-arm64
endif
# test/arm64/run.sh's own programs, built with the rest: the probe of qemu-user's robust-mutex
# emulation, and an empty x86_64 libvgpu.so, the x86 half of the preload path (see run.sh).
ARM64_TEST_PROGS := $(BUILD)/arm64-probe/robust_probe $(BUILD)/lib/x86_64-linux-gnu/libvgpu.so
all: $(ARM64_TEST_PROGS)
$(BUILD)/arm64-probe/robust_probe: test/arm64/robust_probe.c
	@mkdir -p $(@D)
	$(CC) -O2 -o $@ $< -lpthread
$(BUILD)/lib/x86_64-linux-gnu/libvgpu.so:
	@mkdir -p $(@D)
	gcc -shared -o $@ -x c /dev/null
endif

.DEFAULT_GOAL := all
.PHONY: test-arm64 test-arm64-quick
test-arm64:
	$(MAKE) ARCH=arm64 all
	@BUILD=build-arm64 test/arm64/run.sh
# What `make test` at the top runs (beside test-both): ARM64_QUICK leaves out the arch-neutral
# simulations and timing cases that take minutes under qemu (test/arm64/run.sh says which).
test-arm64-quick:
	@$(MAKE) -s ARCH=arm64 all >/dev/null
	@BUILD=build-arm64 ARM64_QUICK=1 test/arm64/run.sh
