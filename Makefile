# SPDX-License-Identifier: GPL-2.0
#
# tern: build the kernel modules (kbuild, out of tree) and the userspace
# tools; run the checks and the guest test lane.
#
#   make               modules + tools for the selected kernel
#   make check         deps, -Werror W=1 build, checkpatch, sparse, selftests
#   make demo          the block device demo in the guest
#   make bench         benchmarks in the guest (not part of check)
#   make soak          SOAK_MINUTES (60) of verified I/O under faults, then
#                      the hostile-client floods at scale
#   make smoke-stock   map, fio verify, unmap on Debian's stock kernel (6.1)
#   make deps          install what the above need (idempotent)
#   make install       modules_install + tools into DESTDIR/PREFIX
#   make dkms-source   the DKMS tree into DESTDIR/usr/src/tern-VERSION
#   make deb           tern-dkms and ternadm .debs into BUILD/deb/
#
# Kernel selection: KDIR= wins; else KERNELRELEASE='s build directory (as
# DKMS passes it); else the running kernel's; else the pinned Debian
# headers (linux-headers-$(KSERIES)-amd64). Any kernel from 6.1 on builds:
# kbuild probes its features first (tools/compat, Documentation/design.rst).

KSERIES ?= 6.12
TERN_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/tern
export TERN_CACHE KSERIES

SRC := $(CURDIR)
BUILD ?= $(SRC)/build
export TERN_BUILD := $(BUILD)

pinned_kver = $(shell dpkg-query -W -f='$${Depends}' linux-headers-$(KSERIES)-amd64 \
	2>/dev/null | grep -o 'linux-headers-$(KSERIES)[^ ,]*' | head -n1 | \
	sed 's/^linux-headers-//')
running_kdir := /lib/modules/$(shell uname -r)/build

ifeq ($(KDIR),)
ifneq ($(KERNELRELEASE),)
KDIR := /lib/modules/$(KERNELRELEASE)/build
else ifneq ($(wildcard $(running_kdir)/Makefile),)
KDIR := $(running_kdir)
else
KDIR = /usr/src/linux-headers-$(pinned_kver)
endif
endif

# The guest always boots the pinned kernel, so the lane builds for it.
GUEST_KDIR = /usr/src/linux-headers-$(pinned_kver)

KBUILD_FLAGS := W=1
ifneq ($(WERROR),)
KBUILD_FLAGS += KCFLAGS=-Werror
endif

TOOL_DIRS := $(patsubst %/Makefile,%,$(wildcard tools/ternadm/Makefile \
	tools/testing/selftests/tern/Makefile))

SOAK_MINUTES ?= 60
SOAK_ROUND ?= 120
SOAK_FAIL_EVERY ?= 2000
# make soak ends with the hostile-client floods at scale (make check runs
# them small): sessions and lanes against caps of 200 and 400, and
# tern_flood's OPEN, WATCH and bogus WRITE floods times SOAK_FLOOD_SCALE
SOAK_FLOOD_SESSIONS ?= 3000
SOAK_FLOOD_LANES ?= 2560
SOAK_FLOOD_SCALE ?= 4

.PHONY: all modules tools deps deps-if-missing check demo bench soak install clean help
.PHONY: dkms-source deb smoke-stock

all: modules tools

modules:
	$(MAKE) -C $(KDIR) M=$(SRC) $(KBUILD_FLAGS) modules

tools:
	@for d in $(TOOL_DIRS); do $(MAKE) -C $$d || exit 1; done

deps:
	@tools/testing/vm/deps.sh

deps-if-missing:
	@tools/testing/vm/deps.sh --if-missing

check: deps-if-missing
	@tools/testing/check

demo: deps-if-missing
	$(MAKE) KDIR=$(GUEST_KDIR) all
	tools/testing/vm/run --rdma --name demo -- $(SRC)/tools/demo.sh

bench: deps-if-missing
	$(MAKE) KDIR=$(GUEST_KDIR) all
	tools/bench/run

# tern on Debian's stock kernel at run time (tools/testing/smoke-stock)
smoke-stock: deps-if-missing
	$(MAKE) KDIR=$(GUEST_KDIR) tools
	tools/testing/smoke-stock

soak: deps-if-missing
	$(MAKE) KDIR=$(GUEST_KDIR) all
	tools/testing/vm/run --rdma --name soak --mem 3072 \
		--timeout $$(( $(SOAK_MINUTES) * 60 + 900 )) -- \
		env SOAK_MINUTES=$(SOAK_MINUTES) SOAK_ROUND=$(SOAK_ROUND) \
		SOAK_FAIL_EVERY=$(SOAK_FAIL_EVERY) $(SRC)/tools/testing/soak.sh
	tools/testing/vm/run --rdma --name soak-floods --timeout 2400 -- \
		env FLOOD_SESSIONS=$(SOAK_FLOOD_SESSIONS) \
		FLOOD_LANES=$(SOAK_FLOOD_LANES) FLOOD_SCALE=$(SOAK_FLOOD_SCALE) \
		$(SRC)/tools/testing/selftests/tern/run_tests flood.sh blk_flood.sh

install:
	$(MAKE) -C $(KDIR) M=$(SRC) modules_install
	@for d in $(TOOL_DIRS); do $(MAKE) -C $$d install || exit 1; done

# dkms.conf builds through `make modules KDIR=...` here, as the tree does.
dkms-source:
	@tools/packaging/dkms-source "$(DESTDIR)"

deb:
	@tools/packaging/build-deb

clean:
	$(MAKE) -C $(KDIR) M=$(SRC) clean
	@for d in $(TOOL_DIRS); do $(MAKE) -C $$d clean; done
	rm -rf $(BUILD)

help:
	@sed -n "3,21p" Makefile | sed 's/^# \{0,1\}//'

print-%:
	@echo '$($*)'
