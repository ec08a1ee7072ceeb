# One entry point for humans and CI. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# JDK 25: JAVA_HOME if it is a 25+, else Temurin's default location (scripts/lib.sh jdk25).
JDK25 := $(shell scripts/lib.sh jdk25)
export JAVA_HOME := $(JDK25)
MVN := ./mvnw -B -ntp
CI ?=

define need_jdk
	@[ -n "$(JDK25)" ] || { echo "error: JDK 25 not found: set JAVA_HOME to a JDK 25 (e.g. /usr/lib/jvm/temurin-25-jdk-amd64)"; exit 1; }
endef

.PHONY: help deps build test test-java test-c test-arm64 test-scripts demo bench bench-fleet bench-footprint fmt lint clean libvgpu soak soak-apiserver stress image image-progs image-progs-arm64 image-test image-arm64 image-test-arm64

help: ## this list
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

deps: ## install the apt/npm tools the tests use (idempotent)
	@scripts/install-deps.sh

build: libvgpu ## compile everything (Java reactor, libvgpu, fakes)
	$(need_jdk)
	$(MVN) -q install -DskipTests

libvgpu: ## build the C library, shrreg-tool and the fake driver libraries
	$(MAKE) -C libvgpu all

# Beside the x86 C suites (whose fake GPU mostly sleeps) run two things that need neither the JVM
# nor the x86 build: the script and deploy checks, and libvgpu built for aarch64 with its quick set
# of suites under qemu-user (libvgpu/test/arm64/run.sh). Their output is printed after the C suites
# and Maven; any of them failing fails the target.
test: deps ## everything: C suite (plus lint, an ASan/UBSan run and the aarch64 build under qemu), Java suite (with format and static checks), scripts
	$(need_jdk)
	@mkdir -p target libvgpu/build-arm64
	@{ scripts/test-scripts.sh && scripts/test-deploy.sh; } >target/test-scripts.log 2>&1 & side=$$!; \
	started=$$SECONDS; \
	( $(MAKE) -s -C libvgpu test-arm64-quick > libvgpu/build-arm64/suite.log 2>&1; r=$$?; \
	  echo "(arm64: $$((SECONDS - started)) s)" >> libvgpu/build-arm64/suite.log; exit $$r ) & arm=$$!; \
	rc=0; { $(MAKE) -C libvgpu all lint test-both \
	  && FUZZ_SECONDS=20 libvgpu/test/fuzz/run.sh \
	  && libvgpu/test/stress/run.sh \
	  && $(MVN) install && scripts/check-no-skips.sh; } || rc=$$?; \
	arm_rc=0; wait $$arm || arm_rc=$$?; \
	side_rc=0; wait $$side || side_rc=$$?; \
	echo "--- libvgpu on aarch64 under qemu-user (make -C libvgpu test-arm64-quick): exit $$arm_rc"; cat libvgpu/build-arm64/suite.log; \
	echo "--- scripts and deploy checks: exit $$side_rc"; cat target/test-scripts.log; \
	[ "$$rc" -eq 0 ] && [ "$$arm_rc" -eq 0 ] && [ "$$side_rc" -eq 0 ]
	@scripts/fleet-bench.sh --check >target/fleet-check.log 2>&1 & fleet=$$!; \
	rc=0; deploy/image/image-test.sh || rc=$$?; \
	fleet_rc=0; wait $$fleet || fleet_rc=$$?; \
	echo "--- fleet check (ran beside the image test): exit $$fleet_rc"; cat target/fleet-check.log; \
	[ "$$rc" -eq 0 ] && [ "$$fleet_rc" -eq 0 ]

test-java: libvgpu ## the Java suite only (a skipped test fails it: scripts/check-no-skips.sh)
	$(need_jdk)
	$(MVN) install
	scripts/check-no-skips.sh

test-scripts: ## the checks that need no JVM: every shell script parses, no literal /proc paths, rules/runbooks/dashboards/installer (scripts/test-deploy.sh)
	@scripts/test-scripts.sh
	@scripts/test-deploy.sh

test-c: libvgpu ## the C suite only
	$(MAKE) -C libvgpu test

test-arm64: ## libvgpu cross-built for aarch64, its suites under qemu-user (docs/arm64.md; ~9 min, `make test` runs the quick set)
	$(MAKE) -C libvgpu test-arm64

demo: build ## run the exporter on a simulated node at http://127.0.0.1:9394/
	bin/vgpu-exporter demo $(DEMO_ARGS)

bench: ## JMH and C benchmarks (numbers go in README)
	$(need_jdk)
	@scripts/bench.sh

bench-fleet: build ## N simulated nodes (NODES="10 50"; 50 needs 8+ cores) scraped by one Prometheus with the rules: series, bytes, Prometheus memory, rule time (README "Fleet")
	@scripts/fleet-bench.sh

bench-footprint: build ## exporter RSS and cgroup charge steady/peak, scrape latency and CPU on 100 and 200 x 8 x 4 nodes (README: Footprint; ~18 min; FOOTPRINT_QUICK=1 ~2 min)
	@exporter/bench/footprint.sh

fmt: ## apply google-java-format (and clang-format for C)
	$(need_jdk)
	$(MVN) -q spotless:apply
	$(MAKE) -C libvgpu fmt

lint: ## format checks and static analysis without the tests
	$(need_jdk)
	$(MVN) -q spotless:check
	$(MAKE) -C libvgpu lint

stress: build ## long reliability runs: libvgpu 32 procs x 8 threads x 60 s with SIGKILLs, fuzzers 300 s each, 10 000 cache dirs
	@scripts/stress.sh

soak: build ## 30-minute soak of the exporter process under 100 concurrent scrapers (RSS/fd slope); SOAK_SECONDS=60 for the load run
	@scripts/soak.sh

soak-apiserver: build ## API server down mid-run for API_OUTAGE_SECONDS (default 300), then back; footprint, reconnect
	@scripts/apiserver-outage.sh

image: ## build the container image vgpu-exporter:0.1.0 into your Docker (DOCKER_HOST, IMAGE=, BASE_IMAGE=; builds the jar if missing)
	$(need_jdk)
	@$(MAKE) -s libvgpu >/dev/null
	@deploy/image/build.sh $(DOCKER)

# The image's static C programs, staged by deploy/image/build.sh: the installer entrypoint and the
# exporter's launcher.
IMAGE_PROGS := deploy/image/target/bin/vgpu-install deploy/image/target/bin/vgpu-exporter-launcher
image-progs: $(IMAGE_PROGS)
deploy/image/target/bin/%: deploy/image/%.c
	@mkdir -p $(@D)
	gcc -O2 -Wall -Wextra -Werror -static -o $@ $<
# The same two for the linux/arm64 image (ARCH=arm64 deploy/image/build.sh), by the cross compiler.
image-progs-arm64: $(IMAGE_PROGS:deploy/image/target/bin/%=deploy/image/target/bin-arm64/%)
deploy/image/target/bin-arm64/%: deploy/image/%.c
	@mkdir -p $(@D)
	aarch64-linux-gnu-gcc -O2 -Wall -Wextra -Werror -static -o $@ $<

image-test: ## build the container image offline with docker, run it on a fixture node, scrape it (also run by test)
	$(need_jdk)
	@deploy/image/image-test.sh

image-arm64: ## build the linux/arm64 image vgpu-exporter:0.1.0-arm64 here (Debian's aarch64 Java 25 and glibc, fetched and verified; docs/arm64.md)
	$(need_jdk)
	@$(MAKE) -s -C libvgpu ARCH=arm64 all >/dev/null
	@ARCH=arm64 deploy/image/build.sh $(DOCKER)

image-test-arm64: ## build the linux/arm64 image and run it under qemu-user on a fixture node, plus a multi-arch manifest (~8 min; docs/arm64.md)
	$(need_jdk)
	@$(MAKE) -s -C libvgpu ARCH=arm64 all >/dev/null
	@deploy/image/image-test-arm64.sh

clean:
	$(MVN) -q clean
	$(MAKE) -C libvgpu clean
