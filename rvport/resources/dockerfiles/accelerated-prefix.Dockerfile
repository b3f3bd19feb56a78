# rvport accelerated prefix: Debian's riscv64 cross GCC and binutils (native build-platform binaries), and for
# Rust stages the build platform's rustc with a native linker for its build scripts (@@RUST@@), gathered
# into one self-contained directory, /opt/xtc, with the build platform's loader and the shared libraries the
# compilers need. Built from the build-platform base (debian-trixie-xtc); nothing reaches the network.
# The image holds only /opt/xtc; riscv64 stages take it with COPY --from and link it to their own headers
# and libraries (xtc-setup.sh). It is built with --platform linux/riscv64 (the assemble stage runs on the
# build platform) so that riscv64 stages find it in the engine by name.
FROM --platform=@@XTC_PLATFORM@@ @@XTC_BASE@@ AS assemble
COPY xtc-assemble.sh xtc-setup.sh /rvport/
RUN sh -eu /rvport/xtc-assemble.sh @@GCC_MAJOR@@ @@RUST@@ && cp /rvport/xtc-setup.sh /opt/xtc/setup.sh

FROM scratch
COPY --from=assemble /opt/xtc/ /opt/xtc/
